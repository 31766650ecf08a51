// HierAllreduce's block collectives (src/comm/mpi/hier_blocks.cpp: ZeRO-1's reduce_scatter and
// allgather) under real MPI on every layout of hier_layouts.h (even, uneven, interleaved, three
// hosts, one host, one rank per host), against MPI_Reduce_scatter_block and MPI_Allgather over
// the whole world: every type and op, blocks from 1 element to 16 MiB per rank.
#include <gtest/gtest.h>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "comm/mpi/hier_allreduce.h"
#include "hier_layouts.h"
#include "support/test_world.h"

using namespace hpctrain;
using hpctrain::testing::expect_equal_sums;
using hpctrain::testing::for_each_layout;
using hpctrain::testing::inputs;
using hpctrain::testing::world;

namespace {

template <typename T>
void check_rs(HierAllreduce& h, int64_t block, MPI_Datatype type, MPI_Op op, bool exact, int salt,
              const std::string& where) {
  const int rank = world().rank(), size = world().size();
  std::vector<T> data = inputs<T>(block * size, rank, salt, exact), flat_in = data;
  std::vector<T> ours(block, T(-7)), flat(block);
  ASSERT_TRUE(h.reduce_scatter(data.data(), ours.data(), block, type, op));
  if (block > 0)
    MPI_Reduce_scatter_block(flat_in.data(), flat.data(), static_cast<int>(block), type, op, MPI_COMM_WORLD);
  const std::string what = where + " block=" + std::to_string(block) + " salt=" + std::to_string(salt);
  expect_equal_sums(ours, flat, exact || op != MPI_SUM, what);
}

template <typename T>
void rs_type(MPI_Datatype type) {
  int salt = 0;
  for_each_layout([&](HierAllreduce& h, const std::string& where) {
    for (MPI_Op op : {MPI_SUM, MPI_MAX, MPI_MIN})
      for (int64_t block : {0, 1, 3, 17, 1001, 20011}) {
        check_rs<T>(h, block, type, op, /*exact=*/true, ++salt, where);
        if (std::is_floating_point_v<T>) check_rs<T>(h, block, type, op, /*exact=*/false, ++salt, where);
      }
  });
}

// Random bit patterns (NaNs, infinities, -0.0 included for float types): the gather copies bits.
std::vector<uint8_t> random_bytes(size_t n, int rank, int salt) {
  std::mt19937 rng(104729 * rank + salt);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

}  // namespace

TEST(HierReduceScatter, FloatEqualsFlatOnEveryLayout) { rs_type<float>(MPI_FLOAT); }
TEST(HierReduceScatter, DoubleEqualsFlatOnEveryLayout) { rs_type<double>(MPI_DOUBLE); }
TEST(HierReduceScatter, Int32EqualsFlatOnEveryLayout) { rs_type<int32_t>(MPI_INT32_T); }
TEST(HierReduceScatter, Int64EqualsFlatOnEveryLayout) { rs_type<int64_t>(MPI_INT64_T); }

TEST(HierReduceScatter, SixtyFourMiBEqualsFlat) {
  const int64_t block = (64 << 20) / 4 / world().size();
  for_each_layout([&](HierAllreduce& h, const std::string& where) {
    if (where.rfind("3+1", 0) != 0 && where.rfind("three", 0) != 0) return;  // two layouts: the test's time
    check_rs<float>(h, block, MPI_FLOAT, MPI_SUM, /*exact=*/false, 3, where);
  });
}

TEST(HierReduceScatter, DeclinesWhatItDoesNotTake) {
  const int size = world().size();
  for_each_layout([&](HierAllreduce& h, const std::string& where) {
    std::vector<uint8_t> b(4 * size, 1), out(4, 9);
    EXPECT_FALSE(h.reduce_scatter(b.data(), out.data(), 4, MPI_UINT8_T, MPI_SUM)) << where;
    std::vector<float> f(4 * size, 1), fo(4, 9);
    EXPECT_FALSE(h.reduce_scatter(f.data(), fo.data(), 4, MPI_FLOAT, MPI_PROD)) << where;
    EXPECT_EQ(f, std::vector<float>(4 * size, 1)) << where << ": a declined call touches nothing";
    EXPECT_EQ(fo, std::vector<float>(4, 9)) << where;
  });
}

// 16-bit sums: host sums cross as 16 bits, the owner adds in float32 and rounds once; small
// integers are exact, others within a few roundings of the float32 sum.
template <typename H>
void rs_half(c10::ScalarType dt, double tol) {
  const int rank = world().rank(), size = world().size();
  int salt = 0;
  for_each_layout([&](HierAllreduce& h, const std::string& where) {
    for (int64_t block : {1, 3, 33, 1001, 40009}) {
      for (bool exact : {true, false}) {
        std::vector<float> f = inputs<float>(block * size, rank, ++salt, exact);
        if (exact)
          for (auto& x : f) x = std::fmod(x, 16.0f);  // |sum| <= 15 x ranks: exact in 8 bits of mantissa
        std::vector<uint16_t> bits(f.size()), out(block);
        for (size_t i = 0; i < f.size(); ++i) {
          H v(f[i]);
          std::memcpy(&bits[i], &v, 2);
          f[i] = static_cast<float>(v);  // the sum of what was sent
        }
        std::vector<float> want(block);
        MPI_Reduce_scatter_block(f.data(), want.data(), static_cast<int>(block), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        h.reduce_scatter_half(bits.data(), out.data(), block, dt);
        double worst = 0;
        for (int64_t i = 0; i < block; ++i) {
          H v;
          std::memcpy(&v, &out[i], 2);
          double err = std::abs(double(static_cast<float>(v)) - want[i]);
          worst = std::max(worst, exact ? err : err / (std::abs(want[i]) + size));
        }
        EXPECT_LE(worst, exact ? 0.0 : tol) << where << " block=" << block;
      }
    }
  });
}

TEST(HierReduceScatter, BFloat16SumsWithinRounding) { rs_half<c10::BFloat16>(c10::kBFloat16, 3 * 0.0079); }
TEST(HierReduceScatter, Float16SumsWithinRounding) { rs_half<c10::Half>(c10::kHalf, 3 * 0.001); }

// Bitwise equal to MPI_Allgather for blocks of 4k bytes, whatever the element size; a block
// whose bytes are not a multiple of 4 is declined untouched.
TEST(HierAllgather, BitwiseEqualsFlatOnEveryLayout) {
  const int rank = world().rank(), size = world().size();
  int salt = 0;
  for_each_layout([&](HierAllreduce& h, const std::string& where) {
    for (size_t elem : {1, 2, 4, 8})
      for (int64_t block : {0, 1, 2, 3, 4, 6, 1000, 65537, (16 << 20) / 8}) {
        const int64_t bytes = block * static_cast<int64_t>(elem);
        if (bytes > 4 << 20 && where.rfind("3+1", 0) != 0 && where.rfind("three", 0) != 0) continue;  // time
        std::vector<uint8_t> mine = random_bytes(bytes, rank, ++salt);
        std::vector<uint8_t> ours(bytes * size, 0xAB), flat(bytes * size);
        std::memcpy(ours.data() + rank * bytes, mine.data(), bytes);
        const std::string what = where + " elem=" + std::to_string(elem) + " block=" + std::to_string(block);
        if (bytes % 4 != 0) {
          std::vector<uint8_t> before = ours;
          EXPECT_FALSE(h.allgather(ours.data(), block, elem)) << what;
          EXPECT_TRUE(ours == before) << what << ": a declined call touches nothing";
          continue;
        }
        ASSERT_TRUE(h.allgather(ours.data(), block, elem)) << what;
        if (bytes > 0)
          MPI_Allgather(mine.data(), static_cast<int>(bytes), MPI_BYTE, flat.data(), static_cast<int>(bytes), MPI_BYTE,
                        MPI_COMM_WORLD);
        EXPECT_TRUE(ours == flat) << what;
      }
  });
}

// ZeRO-1's step on the blocks: reduce_scatter then allgather leaves every rank with the same
// bits, equal to the hierarchical allreduce of the same inputs within rounding.
TEST(HierBlocks, ReduceScatterThenAllgatherIsAnAllreduce) {
  const int rank = world().rank(), size = world().size();
  for_each_layout([&](HierAllreduce& h, const std::string& where) {
    const int64_t block = 4099;
    std::vector<float> data = inputs<float>(block * size, rank, 11, false), all = data, gathered(block * size);
    ASSERT_TRUE(h.reduce_scatter(data.data(), gathered.data() + rank * block, block, MPI_FLOAT, MPI_SUM));
    ASSERT_TRUE(h.allgather(gathered.data(), block, sizeof(float)));
    ASSERT_TRUE(h.allreduce(all.data(), block * size, MPI_FLOAT, MPI_SUM));
    double diff = 0, norm = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      diff += (double(gathered[i]) - all[i]) * (double(gathered[i]) - all[i]);
      norm += double(all[i]) * all[i];
    }
    EXPECT_LE(std::sqrt(diff), 1e-6 * std::sqrt(norm)) << where;
    hpctrain::testing::same_bits_everywhere(gathered, where);
  });
}
