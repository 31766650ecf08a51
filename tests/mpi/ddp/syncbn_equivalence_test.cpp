// SyncBatchNorm over 1, 2 and 4 ranks against single-process torch::nn::BatchNorm on the
// concatenated global batch. Every rank builds the same global batch from a fixed seed and takes
// its slice; results are compared with max relative difference <= 1e-5 (fp32).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <numeric>
#include <vector>

#include "runtime/check.h"
#include "support/syncbn_test_util.h"
#include "support/test_world.h"

using namespace hpctrain;
using hpctrain::testing::cpu_comm;
using hpctrain::testing::max_rel_diff;
using hpctrain::testing::ReferenceBN;
using hpctrain::testing::world;

namespace {

constexpr double kTol = 1e-5;

// The slice [offset, offset + sizes[rank]) of dim 0 that this rank owns.
at::Tensor my_slice(const at::Tensor& global, const std::vector<int64_t>& sizes) {
  int r = world().rank();
  int64_t off = std::accumulate(sizes.begin(), sizes.begin() + r, int64_t{0});
  return global.narrow(0, off, sizes[r]);
}

at::Tensor allreduce_sum(at::Tensor t) {
  t = t.contiguous().clone();
  cpu_comm().allreduce(t, ReduceOp::kSum, "test.sum")->wait();
  return t;
}

struct Case {
  std::vector<int64_t> shape_tail;  // {C} or {C,H,W}
  bool affine;
  std::optional<double> momentum;
};

// Runs `steps` training steps with per-rank batch sizes `sizes` and the global loss
// sum(out * dy), comparing everything with the single-process reference each step.
void run_against_reference(const Case& c, const std::vector<int64_t>& sizes, int steps) {
  const int64_t C = c.shape_tail[0];
  const int64_t N = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  auto opts = torch::nn::BatchNormOptions(C).affine(c.affine).momentum(c.momentum);
  std::vector<int64_t> shape{N};
  shape.insert(shape.end(), c.shape_tail.begin(), c.shape_tail.end());

  at::manual_seed(1234);
  ReferenceBN ref(static_cast<int64_t>(shape.size()), opts);
  SyncBatchNorm sbn(opts, &cpu_comm(), "test");
  hpctrain::testing::randomize_affine(ref, *sbn);

  for (int step = 0; step < steps; ++step) {
    // Shifted, scaled data so the mean matters and fp32 cancellation would show.
    at::Tensor xg = at::randn(shape) * (1.0 + step) + 3.0;
    at::Tensor dy = at::randn(shape);
    at::Tensor xr = xg.clone().requires_grad_();
    at::Tensor outr = ref.forward(xr);
    (outr * dy).sum().backward();

    at::Tensor xl = my_slice(xg, sizes).clone().requires_grad_();
    if (c.affine) {
      sbn->weight.mutable_grad() = at::Tensor();
      sbn->bias.mutable_grad() = at::Tensor();
    }
    at::Tensor out = sbn->forward(xl);
    (out * my_slice(dy, sizes)).sum().backward();

    SCOPED_TRACE("step " + std::to_string(step) + " rank " + std::to_string(world().rank()));
    EXPECT_LE(max_rel_diff(out, my_slice(outr, sizes)), kTol);
    EXPECT_LE(max_rel_diff(xl.grad(), my_slice(xr.grad(), sizes)), kTol);
    if (c.affine) {
      // Local grads; DDP would average them, the global-sum loss wants their SUM.
      EXPECT_LE(max_rel_diff(allreduce_sum(sbn->weight.grad()), ref.param("weight").grad()), kTol);
      EXPECT_LE(max_rel_diff(allreduce_sum(sbn->bias.grad()), ref.param("bias").grad()), kTol);
      ref.param("weight").mutable_grad() = at::Tensor();
      ref.param("bias").mutable_grad() = at::Tensor();
    }
    EXPECT_LE(max_rel_diff(sbn->running_mean, ref.buffer("running_mean")), kTol);
    EXPECT_LE(max_rel_diff(sbn->running_var, ref.buffer("running_var")), kTol);
    EXPECT_EQ(sbn->num_batches_tracked.item<int64_t>(), ref.buffer("num_batches_tracked").item<int64_t>());
  }
  // Eval: running stats, no communication, still equal.
  sbn->eval();
  ref.module->eval();
  int64_t synced = sbn->synced_forwards();
  at::Tensor xe = at::randn(shape);
  EXPECT_LE(max_rel_diff(sbn->forward(my_slice(xe, sizes)), my_slice(ref.forward(xe), sizes)), kTol);
  EXPECT_EQ(sbn->synced_forwards(), synced);
}

std::vector<int64_t> equal_sizes(int64_t per_rank) { return std::vector<int64_t>(world().size(), per_rank); }

// Uneven local batches, with an empty one when there are several ranks.
std::vector<int64_t> uneven_sizes() {
  switch (world().size()) {
    case 1: return {5};
    case 2: return {3, 0};
    case 4: return {3, 5, 0, 8};
    default: {
      std::vector<int64_t> s(world().size());
      for (int r = 0; r < world().size(); ++r) s[r] = r % 3 == 2 ? 0 : r + 2;
      return s;
    }
  }
}

class SyncBnCases : public ::testing::TestWithParam<Case> {};

TEST_P(SyncBnCases, EqualBatchesMatchSingleProcess) { run_against_reference(GetParam(), equal_sizes(4), 3); }

TEST_P(SyncBnCases, UnevenBatchesIncludingEmptyMatchSingleProcess) {
  run_against_reference(GetParam(), uneven_sizes(), 3);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SyncBnCases,
                         ::testing::Values(Case{{6}, true, 0.1}, Case{{6}, false, 0.1}, Case{{4, 5, 3}, true, 0.1},
                                           Case{{4, 5, 3}, false, std::nullopt}, Case{{3, 7}, true, std::nullopt},
                                           Case{{2, 3, 2, 2}, true, 0.3}));

// The DDP view: each rank's loss is the MEAN over its local batch, and parameter gradients are
// averaged over ranks. An upstream Linear layer's averaged gradient, and BN's averaged weight
// and bias gradients, must equal single-process training on the concatenated batch with a
// global mean loss; each rank's input gradient is world_size times the single-process one.
TEST(SyncBn, MeanLossWithRankAveragingMatchesSingleProcess) {
  const int64_t per_rank = 5, F = 7, C = 4, W = world().size(), N = per_rank * W;
  at::manual_seed(99);
  at::Tensor lin_w = at::randn({C, F}), xg = at::randn({N, F}), tg = at::randn({N, C});
  auto opts = torch::nn::BatchNormOptions(C);
  ReferenceBN ref(2, opts);
  SyncBatchNorm sbn(opts, &cpu_comm(), "mean_loss");
  hpctrain::testing::randomize_affine(ref, *sbn);

  at::Tensor wr = lin_w.clone().requires_grad_(), xr = xg.clone().requires_grad_();
  at::Tensor yr = ref.forward(at::matmul(xr, wr.t()));
  ((yr - tg).pow(2).sum(1)).mean().backward();

  std::vector<int64_t> sizes = equal_sizes(per_rank);
  at::Tensor wl = lin_w.clone().requires_grad_(), xl = my_slice(xg, sizes).clone().requires_grad_();
  at::Tensor yl = sbn->forward(at::matmul(xl, wl.t()));
  ((yl - my_slice(tg, sizes)).pow(2).sum(1)).mean().backward();

  auto avg = [&](const at::Tensor& g) { return allreduce_sum(g) / static_cast<double>(W); };
  EXPECT_LE(max_rel_diff(avg(wl.grad()), wr.grad()), kTol);
  EXPECT_LE(max_rel_diff(avg(sbn->weight.grad()), ref.param("weight").grad()), kTol);
  EXPECT_LE(max_rel_diff(avg(sbn->bias.grad()), ref.param("bias").grad()), kTol);
  EXPECT_LE(max_rel_diff(xl.grad(), my_slice(xr.grad(), sizes) * static_cast<double>(W)), kTol);
}

// A rank with a wrong input still joins the collective, so every rank raises (no hang), and
// the message names the offending rank.
TEST(SyncBn, InvalidInputOnOneRankRaisesOnEveryRank) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2+ ranks (a world of 1 has no collective)";
  SyncBatchNorm sbn(torch::nn::BatchNormOptions(3), &cpu_comm(), "bad");
  const int bad = world().size() - 1;
  at::Tensor x = world().rank() == bad ? at::randn({4, 5}) : at::randn({4, 3});
  try {
    sbn->forward(x);
    ADD_FAILURE() << "no error on rank " << world().rank();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("rank " + std::to_string(bad)), std::string::npos) << msg;
    EXPECT_NE(msg.find("syncbn.bad"), std::string::npos) << msg;
  }
  // The collective stream is still aligned: a valid step works on every rank afterwards.
  at::Tensor ok = sbn->forward(at::randn({4, 3}));
  EXPECT_EQ(ok.size(0), 4);
}

TEST(SyncBn, OneValuePerChannelOverAllRanksRaisesOnEveryRank) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2+ ranks (a world of 1 uses torch's own check)";
  SyncBatchNorm sbn(torch::nn::BatchNormOptions(3), &cpu_comm(), "tiny");
  at::Tensor x = at::randn({world().rank() == 0 ? 1 : 0, 3});
  EXPECT_THROW(sbn->forward(x), Error);
}

}  // namespace
