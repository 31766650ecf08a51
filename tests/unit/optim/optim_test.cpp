// optim/optim.h: the schedule's numbers at chosen steps, the linear scaling rule, clipping by
// the global norm, and the optimizers' own update rules on one known parameter.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <cmath>

#include "optim/optim_config.h"
#include "optim/optim.h"

using namespace hpctrain;

namespace {
OptimConfig with_schedule(const std::string& s, int64_t warmup = 0) {
  OptimConfig c;
  c.schedule = s;
  c.warmup_steps = warmup;
  return c;
}
}  // namespace

TEST(LrSchedule, WarmupRisesLinearlyToTheBaseLr) {
  LrSchedule s(with_schedule("constant", 4), 0.8, 100);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.2);
  EXPECT_DOUBLE_EQ(s.lr_at(1), 0.4);
  EXPECT_DOUBLE_EQ(s.lr_at(3), 0.8);
  EXPECT_DOUBLE_EQ(s.lr_at(4), 0.8);
  EXPECT_DOUBLE_EQ(s.lr_at(99), 0.8);
}

TEST(LrSchedule, CosineFallsFromBaseToZeroAfterWarmup) {
  LrSchedule s(with_schedule("cosine", 10), 1.0, 110);  // 100 cosine steps
  EXPECT_DOUBLE_EQ(s.lr_at(10), 1.0);
  EXPECT_NEAR(s.lr_at(60), 0.5, 1e-12);  // half way
  EXPECT_NEAR(s.lr_at(35), 0.5 * (1 + std::cos(M_PI * 0.25)), 1e-12);
  EXPECT_NEAR(s.lr_at(110), 0.0, 1e-12);
  EXPECT_NEAR(s.lr_at(500), 0.0, 1e-12);  // past the end: stays at 0
}

TEST(LrSchedule, StepDecayMultipliesByGammaEveryStepSize) {
  OptimConfig c = with_schedule("step");
  c.step_size = 10;
  c.gamma = 0.5;
  LrSchedule s(c, 0.4, 100);
  EXPECT_DOUBLE_EQ(s.lr_at(9), 0.4);
  EXPECT_DOUBLE_EQ(s.lr_at(10), 0.2);
  EXPECT_DOUBLE_EQ(s.lr_at(25), 0.1);
}

TEST(LrSchedule, ApplySetsEveryGroupsLr) {
  at::Tensor p = at::zeros({2}).requires_grad_();
  OptimConfig c = with_schedule("constant", 2);
  auto opt = make_optimizer(c, {p}, 1.0);
  LrSchedule(c, 1.0, 10).apply(*opt, 0);
  EXPECT_DOUBLE_EQ(opt->param_groups()[0].options().get_lr(), 0.5);
}

TEST(ScaledLr, LinearScalingRuleOnlyWhenAReferenceBatchIsSet) {
  OptimConfig c;
  c.lr = 0.1;
  EXPECT_DOUBLE_EQ(scaled_lr(c, 512), 0.1);
  c.lr_ref_batch = 256;
  EXPECT_DOUBLE_EQ(scaled_lr(c, 512), 0.2);
  EXPECT_DOUBLE_EQ(scaled_lr(c, 64), 0.025);
}

TEST(ClipGradNorm, ScalesToMaxNormByTheGlobalNorm) {
  at::Tensor a = at::zeros({1}).requires_grad_(), b = at::zeros({1}).requires_grad_();
  a.mutable_grad() = at::full({1}, 3.0);
  b.mutable_grad() = at::full({1}, 4.0);  // global norm 5
  EXPECT_NEAR(clip_grad_norm({a, b}, 1.0), 5.0, 1e-6);
  EXPECT_NEAR(a.grad().item<double>(), 0.6, 1e-5);
  EXPECT_NEAR(b.grad().item<double>(), 0.8, 1e-5);
  EXPECT_NEAR(clip_grad_norm({a, b}, 10.0), 1.0, 1e-5);  // below max: unchanged
  EXPECT_NEAR(a.grad().item<double>(), 0.6, 1e-5);
}

TEST(MakeOptimizer, SgdWithMomentumAndWeightDecayFollowsItsUpdateRule) {
  OptimConfig c;
  c.momentum = 0.9;
  c.weight_decay = 0.1;
  at::Tensor p = at::full({1}, 1.0).requires_grad_();
  auto opt = make_optimizer(c, {p}, 0.5);
  double v = 0, x = 1.0;
  for (int k = 0; k < 3; ++k) {
    p.mutable_grad() = at::full({1}, 2.0);
    opt->step();
    double g = 2.0 + 0.1 * x;      // weight decay adds wd * x
    v = k == 0 ? g : 0.9 * v + g;  // torch's momentum buffer starts at the first gradient
    x -= 0.5 * v;
    EXPECT_NEAR(p.item<double>(), x, 1e-6) << "step " << k;
  }
}

TEST(MakeOptimizer, AdamwFirstStepMovesByLrTimesSignAndDecaysDecoupled) {
  OptimConfig c;
  c.optimizer = "adamw";
  c.weight_decay = 0.1;
  at::Tensor p = at::full({1}, 2.0).requires_grad_();
  auto opt = make_optimizer(c, {p}, 0.01);
  p.mutable_grad() = at::full({1}, -3.0);
  opt->step();
  // x * (1 - lr * wd), then the bias-corrected first step is lr * g / |g| (eps aside).
  EXPECT_NEAR(p.item<double>(), 2.0 * (1 - 0.01 * 0.1) + 0.01, 1e-6);
}
