// SyncBatchNorm on CUDA (skipped without a GPU): a world of 1 equals BatchNorm2d exactly, and
// the collective path (fake 2-rank world) matches BatchNorm2d on two copies.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "support/mirror_comm.h"
#include "support/syncbn_test_util.h"
#include "support/test_world.h"

using namespace hpctrain;

TEST(SyncBnCuda, MatchesBatchNorm2dOnGpu) {
  if (hpctrain::testing::no_gpu()) GTEST_SKIP() << "no CUDA device visible; SyncBN CUDA test skipped";
  const at::Device dev(at::kCUDA, 0);
  auto opts = torch::nn::BatchNormOptions(8);
  at::manual_seed(2);
  at::Tensor x = at::randn({4, 8, 6, 6}).to(dev), dy = at::randn({4, 8, 6, 6}).to(dev);

  hpctrain::testing::ReferenceBN ref(4, opts);
  ref.module->to(dev);
  SyncBatchNorm one(opts, &hpctrain::testing::cpu_comm(), "gpu");
  one->to(dev);
  at::Tensor xa = x.clone().requires_grad_(), xb = x.clone().requires_grad_();
  at::Tensor ya = one->forward(xa), yb = ref.forward(xb);
  (ya * dy).sum().backward();
  (yb * dy).sum().backward();
  EXPECT_TRUE(at::equal(ya, yb));
  EXPECT_TRUE(at::equal(xa.grad(), xb.grad()));
  EXPECT_TRUE(at::equal(one->running_var, ref.buffer("running_var")));

  hpctrain::testing::MirrorComm comm(2);
  SyncBatchNorm two(opts, &comm, "gpu2");
  two->to(dev);
  hpctrain::testing::ReferenceBN ref2(4, opts);
  ref2.module->to(dev);
  at::Tensor xc = x.clone().requires_grad_(), xd = at::cat({x, x}).requires_grad_();
  at::Tensor yc = two->forward(xc), yd = ref2.forward(xd);
  (yc * dy).sum().backward();
  (yd * at::cat({dy, dy})).sum().backward();
  EXPECT_LE(hpctrain::testing::max_rel_diff(yc, yd.narrow(0, 0, 4)), 1e-5);
  EXPECT_LE(hpctrain::testing::max_rel_diff(xc.grad(), xd.grad().narrow(0, 0, 4)), 1e-5);
  EXPECT_LE(hpctrain::testing::max_rel_diff(two->running_var, ref2.buffer("running_var")), 1e-5);
}
