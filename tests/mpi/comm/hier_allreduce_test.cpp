// HierAllreduce (src/comm/mpi/hier_allreduce.h) under real MPI with 1, 2 and 4 ranks. The host
// groups are given to create() as a partition of the world, so one machine runs every layout a
// cluster has: even (2+2), uneven (3+1, 1+3), interleaved ({0,2},{1,3}), one rank per host, one
// host. Against MPI_Allreduce over the whole world (the flat path): every type and op, sizes from
// 1 element to 64 MiB; every rank gets the same bits. bfloat16/float16 sums (16 bits across
// hosts) within their rounding. Then MpiCommunicator forced to the hierarchical path: allreduce,
// reduce_scatter, allgather_into (in and out of place) in every dtype, and describe_algorithms().
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "comm/mpi/hier_allreduce.h"
#include "comm/mpi/mpi_communicator.h"
#include "runtime/check.h"
#include "hier_layouts.h"
#include "support/test_world.h"

using namespace hpctrain;
using hpctrain::testing::world;

namespace {

using hpctrain::testing::expect_equal_sums;
using hpctrain::testing::for_each_layout;
using hpctrain::testing::inputs;
using hpctrain::testing::same_bits_everywhere;

// Hierarchical against flat MPI_Allreduce on the same inputs.
template <typename T>
void check(HierAllreduce& h, int64_t n, MPI_Datatype type, MPI_Op op, bool exact, int salt, const std::string& where) {
  const int rank = world().rank();
  std::vector<T> ours = inputs<T>(n, rank, salt, exact), flat = ours;
  ASSERT_TRUE(h.allreduce(ours.data(), n, type, op));
  if (n > 0) MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(n), type, op, MPI_COMM_WORLD);
  const std::string what = where + " n=" + std::to_string(n) + " salt=" + std::to_string(salt);
  expect_equal_sums(ours, flat, exact || op != MPI_SUM, what);
  same_bits_everywhere(ours, what);
}

template <typename T>
void check_type(MPI_Datatype type) {
  int salt = 0;
  for_each_layout([&](HierAllreduce& h, const std::string& where) {
    for (MPI_Op op : {MPI_SUM, MPI_MAX, MPI_MIN})
      for (int64_t n : {0, 1, 2, 3, 17, 31, 33, 1001, 100003}) {
        check<T>(h, n, type, op, /*exact=*/true, ++salt, where);
        if (std::is_floating_point_v<T>) check<T>(h, n, type, op, /*exact=*/false, ++salt, where);
      }
  });
}

}  // namespace

TEST(HierAllreduce, FloatEqualsFlatOnEveryLayout) { check_type<float>(MPI_FLOAT); }
TEST(HierAllreduce, DoubleEqualsFlatOnEveryLayout) { check_type<double>(MPI_DOUBLE); }
TEST(HierAllreduce, Int32EqualsFlatOnEveryLayout) { check_type<int32_t>(MPI_INT32_T); }
TEST(HierAllreduce, Int64EqualsFlatOnEveryLayout) { check_type<int64_t>(MPI_INT64_T); }

TEST(HierAllreduce, SixtyFourMiBEqualsFlat) {
  for_each_layout([&](HierAllreduce& h, const std::string& where) {
    if (where.rfind("3+1", 0) != 0 && where.rfind("even", 0) != 0) return;  // two layouts: the test's time
    check<float>(h, (64 << 20) / 4, MPI_FLOAT, MPI_SUM, /*exact=*/false, 1, where);
  });
}

TEST(HierAllreduce, LayoutIsSeenAlikeByEveryRank) {
  const int size = world().size();
  for_each_layout([&](HierAllreduce& h, const std::string& where) {
    const HostLayout& l = h.layout();
    int total = 0;
    for (int k : l.ranks_per_host) total += k;
    EXPECT_EQ(total, size) << where;
    EXPECT_EQ(l.hosts, static_cast<int>(l.ranks_per_host.size())) << where;
    EXPECT_EQ(l.ranks_per_host[l.host_index], l.local_size) << where;
    for (int k : l.ranks_per_host) EXPECT_EQ(h.parts() % k, 0) << where << ": parts shared evenly on every host";
    std::vector<int> hosts = l.ranks_per_host;
    MPI_Bcast(hosts.data(), static_cast<int>(hosts.size()), MPI_INT, 0, MPI_COMM_WORLD);
    EXPECT_EQ(hosts, l.ranks_per_host) << where;
  });
}

TEST(HierAllreduce, DeclinesWhatItDoesNotTake) {
  for_each_layout([&](HierAllreduce& h, const std::string& where) {
    std::vector<uint8_t> b(8, 1);
    EXPECT_FALSE(h.allreduce(b.data(), 8, MPI_UINT8_T, MPI_SUM)) << where;
    std::vector<float> f(8, 1);
    EXPECT_FALSE(h.allreduce(f.data(), 8, MPI_FLOAT, MPI_PROD)) << where;
    EXPECT_EQ(f, std::vector<float>(8, 1)) << where << ": a declined call touches nothing";
  });
}

// 16-bit sums: within the type's rounding of the float32 sum (each inter-host combine rounds),
// the same bits on every rank; small integers are exact.
template <typename H>
void check_half(c10::ScalarType dt, double tol) {
  const int rank = world().rank(), size = world().size();
  int salt = 0;
  for_each_layout([&](HierAllreduce& h, const std::string& where) {
    for (int64_t n : {1, 3, 33, 1001, 100003}) {
      for (bool exact : {true, false}) {
        std::vector<float> f = inputs<float>(n, rank, ++salt, exact);
        if (exact)
          for (auto& x : f) x = std::fmod(x, 16.0f);  // |sum| <= 60: exact in 8 bits of mantissa
        std::vector<uint16_t> bits(n);
        for (int64_t i = 0; i < n; ++i) {
          H v(f[i]);
          std::memcpy(&bits[i], &v, 2);
          f[i] = static_cast<float>(v);  // the sum of what was sent
        }
        MPI_Allreduce(MPI_IN_PLACE, f.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        h.sum_half(bits.data(), n, dt);
        double worst = 0;
        for (int64_t i = 0; i < n; ++i) {
          H v;
          std::memcpy(&v, &bits[i], 2);
          double err = std::abs(double(static_cast<float>(v)) - f[i]);
          worst = std::max(worst, exact ? err : err / (std::abs(f[i]) + size));
        }
        EXPECT_LE(worst, exact ? 0.0 : tol) << where << " n=" << n;
        same_bits_everywhere(bits, where);
      }
    }
  });
}

TEST(HierAllreduce, BFloat16SumsWithinRounding) { check_half<c10::BFloat16>(c10::kBFloat16, 3 * 0.0079); }
TEST(HierAllreduce, Float16SumsWithinRounding) { check_half<c10::Half>(c10::kHalf, 3 * 0.001); }

// The communicator on the hierarchical path (forced; all ranks here share one real host).
namespace {

MpiCommunicator& hier_comm() {
  static MpiCommunicator* c = [] {
    CommSettings s;
    s.collective_timeout_s = 0;
    s.allreduce = AllreduceAlgo::kHierarchical;
    return new MpiCommunicator(MPI_COMM_WORLD, s);  // outlives the tests; MPI ends with the process
  }();
  return *c;
}

}  // namespace

TEST(HierCommunicator, SaysWhichPathAndWhy) {
  auto lines = hier_comm().describe_algorithms();
  ASSERT_FALSE(lines.empty());
  if (world().size() > 1) {
    EXPECT_NE(lines[0].find("hierarchical"), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("--allreduce hierarchical"), std::string::npos) << lines[0];
  }
}

TEST(HierCommunicator, AllreduceReduceScatterAllgatherInEveryDtype) {
  MpiCommunicator& c = hier_comm();
  const int n = c.size(), r = c.rank();
  for (auto dt : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kInt, at::kLong}) {
    const bool half = dt == at::kHalf || dt == at::kBFloat16;
    for (int64_t block : {1, 7, 1000}) {
      // Exact inputs: i % 16 + 16 r for the half types, i + 100 r otherwise.
      auto input = [&](int q) {
        at::Tensor i = at::arange(block * n, at::kDouble);
        return half ? at::remainder(i, 16) + 16 * q : i + 100 * q;
      };
      at::Tensor want = at::zeros({block * n}, at::kDouble);
      for (int q = 0; q < n; ++q) want += input(q);
      at::Tensor t = input(r).to(dt);
      c.allreduce(t, ReduceOp::kSum, "test.hier")->wait();
      EXPECT_TRUE(at::equal(t, want.to(dt))) << c10::toString(dt) << " allreduce " << block;
      at::Tensor out = at::full({block}, -1, dt);
      c.reduce_scatter(input(r).to(dt), out, ReduceOp::kSum, "test.hier_rs")->wait();
      EXPECT_TRUE(at::equal(out, want.narrow(0, r * block, block).to(dt))) << c10::toString(dt) << " rs " << block;
      // allgather_into, out of place and in place (own block of the output)
      at::Tensor mine = (at::arange(block, at::kDouble) + 1000 * r).to(dt);
      at::Tensor all = at::full({block * n}, -1, dt);
      c.allgather_into(mine, all, "test.hier_ag")->wait();
      at::Tensor inplace = at::full({block * n}, -1, dt);
      inplace.narrow(0, r * block, block).copy_(mine);
      c.allgather_into(inplace.narrow(0, r * block, block), inplace, "test.hier_ag_in_place")->wait();
      for (int q = 0; q < n; ++q) {
        at::Tensor theirs = (at::arange(block, at::kDouble) + 1000 * q).to(dt);
        EXPECT_TRUE(at::equal(all.narrow(0, q * block, block), theirs)) << c10::toString(dt) << " ag " << q;
        EXPECT_TRUE(at::equal(inplace.narrow(0, q * block, block), theirs)) << c10::toString(dt) << " ag in place " << q;
      }
    }
  }
}

TEST(HierCommunicator, DifferentAlgorithmsOnRanksIsAnError) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  CommSettings s;
  s.collective_timeout_s = 0;
  s.allreduce = world().rank() == 0 ? AllreduceAlgo::kFlat : AllreduceAlgo::kHierarchical;
  try {
    MpiCommunicator c(MPI_COMM_WORLD, s);
    ADD_FAILURE() << "no error";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("different allreduce algorithms"), std::string::npos) << e.what();
  }
}
