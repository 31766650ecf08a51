// Test helpers for HierAllreduce (hier_allreduce_test.cpp, hier_blocks_test.cpp): the host
// layouts one machine can pose (the groups given to create() as a partition of the world), and
// inputs and checks shared by the tests.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "comm/mpi/hier_allreduce.h"
#include "support/test_world.h"

namespace hpctrain::testing {

struct Grouping {
  std::string name;
  std::function<int(int rank, int size)> host;  // the host a rank is on
};

inline std::vector<Grouping> groupings() {
  return {
      {"one host", [](int, int) { return 0; }},
      {"one rank per host", [](int r, int) { return r; }},
      {"even halves", [](int r, int n) { return r < (n + 1) / 2 ? 0 : 1; }},
      {"3+1", [](int r, int n) { return r < n - 1 ? 0 : 1; }},
      {"1+3", [](int r, int) { return r == 0 ? 0 : 1; }},
      {"interleaved", [](int r, int) { return r % 2; }},
      {"three hosts", [](int r, int) { return r % 3; }},
  };
}

// Runs `body` once per grouping with that grouping's HierAllreduce.
inline void for_each_layout(const std::function<void(HierAllreduce&, const std::string&)>& body) {
  const int rank = world().rank(), size = world().size();
  for (const auto& g : groupings()) {
    MPI_Comm node;
    ASSERT_EQ(MPI_SUCCESS, MPI_Comm_split(MPI_COMM_WORLD, g.host(rank, size), rank, &node));
    auto h = HierAllreduce::create(MPI_COMM_WORLD, node);
    MPI_Comm_free(&node);
    body(*h, g.name + " (" + h->layout().text() + ", " + std::to_string(h->parts()) + " parts)");
  }
}

// Random values; small integers when `exact` (every sum representable, so order cannot matter).
template <typename T>
std::vector<T> inputs(int64_t n, int rank, int salt, bool exact) {
  std::mt19937 rng(7919 * rank + salt);
  std::uniform_int_distribution<int> di(-1000, 1000);
  std::uniform_real_distribution<double> dr(-1.0, 1.0);
  std::vector<T> v(n);
  for (auto& x : v) x = exact ? static_cast<T>(di(rng)) : static_cast<T>(dr(rng));
  return v;
}

template <typename T>
void same_bits_everywhere(const std::vector<T>& v, const std::string& what) {
  std::vector<T> root = v;
  MPI_Bcast(root.data(), static_cast<int>(root.size() * sizeof(T)), MPI_BYTE, 0, MPI_COMM_WORLD);
  int differ = std::memcmp(root.data(), v.data(), v.size() * sizeof(T)) != 0, any = 0;
  MPI_Allreduce(&differ, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(any, 0) << "ranks hold different bits: " << what;
}

// `ours` equals `flat` exactly when `exact` (or for max/min), else within 1e-6 of its norm
// (floating-point sums in another order).
template <typename T>
void expect_equal_sums(const std::vector<T>& ours, const std::vector<T>& flat, bool exact, const std::string& what) {
  if (exact) {
    EXPECT_TRUE(ours == flat) << what;
    return;
  }
  double diff = 0, norm = 0;
  for (size_t i = 0; i < flat.size(); ++i) {
    diff += (double(ours[i]) - double(flat[i])) * (double(ours[i]) - double(flat[i]));
    norm += double(flat[i]) * double(flat[i]);
  }
  EXPECT_LE(std::sqrt(diff), 1e-6 * std::sqrt(norm) + 1e-30) << what;
}

}  // namespace hpctrain::testing
