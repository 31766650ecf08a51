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

// Rank r's input: element i = r * 1000 + i (exact in every dtype used here for small sizes).
at::Tensor rank_input(int64_t numel, int rank, at::ScalarType dt) {
  return (at::arange(numel, at::kDouble) + rank * 100).to(dt);
}

}  // namespace

TEST(ReduceScatter, SumAndAvgGiveEachRankItsBlock) {
  Communicator& c = cpu_comm();
  int n = c.size(), r = c.rank();
  for (auto dt : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kInt, at::kLong}) {
    for (int64_t block : {1, 7, 1000}) {
      at::Tensor in = rank_input(block * n, r, dt);
      at::Tensor out = at::full({block}, -1, dt);
      c.reduce_scatter(in, out, ReduceOp::kSum, "test.rs")->wait();
      // sum over ranks q of (i + 100 q) for i in rank r's block
      at::Tensor idx = at::arange(r * block, (r + 1) * block, at::kDouble);
      at::Tensor want = idx * n + 100.0 * n * (n - 1) / 2;
      EXPECT_TRUE(at::allclose(out.to(at::kDouble), want, 1e-2, 0)) << c10::toString(dt) << " block " << block;
      if (at::isFloatingType(dt)) {
        at::Tensor avg = at::empty({block}, dt);
        c.reduce_scatter(rank_input(block * n, r, dt), avg, ReduceOp::kAvg, "test.rs_avg")->wait();
        EXPECT_TRUE(at::allclose(avg.to(at::kDouble), want / n, 1e-2, 0)) << c10::toString(dt);
      }
    }
  }
}

TEST(ReduceScatter, MaxAndMin) {
  Communicator& c = cpu_comm();
  int n = c.size(), r = c.rank();
  // A fresh input for each: the contract leaves `input` unspecified afterwards (the
  // shared-memory path reduces it in place).
  at::Tensor mx = at::empty({3}), mn = at::empty({3});
  c.reduce_scatter(at::full({3 * n}, static_cast<float>(r)), mx, ReduceOp::kMax)->wait();
  c.reduce_scatter(at::full({3 * n}, static_cast<float>(r)), mn, ReduceOp::kMin)->wait();
  EXPECT_EQ(mx.max().item<float>(), n - 1);
  EXPECT_EQ(mn.min().item<float>(), 0);
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
