// reduce_scatter and allgather_into on the MPI backend (1, 2 and 4 ranks): every dtype the
// contract names, odd block sizes, in-place allgather, and errors for bad shapes.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "comm/communicator.h"
#include "runtime/check.h"
#include "support/test_world.h"

using namespace hpctrain;
using namespace hpctrain::testing;

namespace {

// Rank r's input: element i = r * 100 + i (exact in every dtype used here for small sizes).
at::Tensor rank_input(int64_t numel, int rank, at::ScalarType dt) {
  return (at::arange(numel, at::kDouble) + rank * 100).to(dt);
}

// For the reductions: element i = (i % 16) + 16 r for fp16/bf16 (every sum over at most 4 ranks
// is an integer <= 156, exact in bf16's 8 bits), i + 100 r otherwise (exact in float, double
// and the integer types). So every result is exact, and is compared whole with at::equal: a
// block off by one element, or a wrong op, is a mismatch.
bool low_precision(at::ScalarType dt) { return dt == at::kHalf || dt == at::kBFloat16; }
// In double (exact); `dt` picks the formula, the caller converts.
at::Tensor reduce_input(at::Tensor idx, int rank, at::ScalarType dt) {
  if (low_precision(dt)) return at::remainder(idx, 16) + 16 * rank;
  return idx + 100 * rank;
}

}  // namespace

TEST(ReduceScatter, SumAndAvgGiveEachRankItsBlock) {
  Communicator& c = cpu_comm();
  int n = c.size(), r = c.rank();
  for (auto dt : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kInt, at::kLong}) {
    for (int64_t block : {1, 7, 1000}) {
      at::Tensor in = reduce_input(at::arange(block * n, at::kDouble), r, dt).to(dt);
      at::Tensor out = at::full({block}, -1, dt);
      c.reduce_scatter(in, out, ReduceOp::kSum, "test.rs")->wait();
      // sum over ranks q of rank q's input, over rank r's block, in double (exact)
      at::Tensor idx = at::arange(r * block, (r + 1) * block, at::kDouble);
      at::Tensor want = at::zeros({block}, at::kDouble);
      for (int q = 0; q < n; ++q) want += reduce_input(idx, q, dt);
      EXPECT_TRUE(at::equal(out, want.to(dt))) << c10::toString(dt) << " block " << block;
      if (at::isFloatingType(dt)) {
        // n is 1, 2 or 4, and every sum here divides by it: the average is exact too.
        at::Tensor avg = at::empty({block}, dt);
        c.reduce_scatter(reduce_input(at::arange(block * n, at::kDouble), r, dt).to(dt), avg, ReduceOp::kAvg,
                         "test.rs_avg")
            ->wait();
        EXPECT_TRUE(at::equal(avg, (want / n).to(dt))) << c10::toString(dt) << " block " << block;
      }
    }
  }
}

TEST(ReduceScatter, MaxAndMin) {
  Communicator& c = cpu_comm();
  int n = c.size(), r = c.rank();
  // Element i of rank q: ((3 i + 7 q) mod 11) - 5, so the max, the min and the sum over ranks
  // differ element by element (at 2+ ranks); whole blocks are compared with the reference.
  auto input = [&](int q, at::ScalarType dt) {
    return (at::remainder(at::arange(3 * n, at::kDouble) * 3 + 7 * q, 11) - 5).to(dt);
  };
  for (auto dt : {at::kFloat, at::kDouble, at::kInt}) {
    at::Tensor want_max = input(0, dt), want_min = input(0, dt);
    for (int q = 1; q < n; ++q) {
      want_max = at::maximum(want_max, input(q, dt));
      want_min = at::minimum(want_min, input(q, dt));
    }
    // A fresh input for each: the contract leaves `input` unspecified afterwards (the
    // shared-memory path reduces it in place).
    at::Tensor mx = at::empty({3}, dt), mn = at::empty({3}, dt);
    c.reduce_scatter(input(r, dt), mx, ReduceOp::kMax)->wait();
    c.reduce_scatter(input(r, dt), mn, ReduceOp::kMin)->wait();
    EXPECT_TRUE(at::equal(mx, want_max.narrow(0, 3 * r, 3))) << c10::toString(dt) << " max " << mx;
    EXPECT_TRUE(at::equal(mn, want_min.narrow(0, 3 * r, 3))) << c10::toString(dt) << " min " << mn;
  }
}

TEST(AllgatherInto, EveryDtypeSeparateAndInPlace) {
  Communicator& c = cpu_comm();
  int n = c.size(), r = c.rank();
  for (auto dt : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kInt, at::kLong, at::kByte}) {
    for (int64_t block : {1, 5, 4099}) {
      at::Tensor want = at::cat([&] {
        std::vector<at::Tensor> v;
        for (int q = 0; q < n; ++q) v.push_back(rank_input(block, q, dt));
        return v;
      }());
      at::Tensor out = at::zeros({block * n}, dt);
      c.allgather_into(rank_input(block, r, dt), out, "test.ag")->wait();
      EXPECT_TRUE(at::equal(out, want)) << c10::toString(dt) << " block " << block;
      at::Tensor flat = at::zeros({block * n}, dt);
      at::Tensor mine = flat.narrow(0, r * block, block);
      mine.copy_(rank_input(block, r, dt));
      c.allgather_into(mine, flat, "test.ag_inplace")->wait();
      EXPECT_TRUE(at::equal(flat, want)) << "in place, " << c10::toString(dt);
    }
  }
}

TEST(FlatCollectives, WrongSizesAreErrorsNamingBoth) {
  Communicator& c = cpu_comm();
  int n = c.size();
  try {
    c.reduce_scatter(at::zeros({4 * n + 1}), at::zeros({4}), ReduceOp::kSum);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reduce_scatter"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(4 * n + 1)), std::string::npos) << e.what();
  }
  EXPECT_THROW(c.allgather_into(at::zeros({3}), at::zeros({3 * n}, at::kDouble)), Error);
  EXPECT_THROW(c.reduce_scatter(at::zeros({2 * n}, at::kByte), at::zeros({2}, at::kByte), ReduceOp::kSum), Error);
}
