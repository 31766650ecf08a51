// optim/optim.h, schedule=wsd: warmup, a stable phase at the base lr, and a linear decay to
// --min-lr over the last ceil(decay_frac x total) steps; cosine's floor at --min-lr.
#include <gtest/gtest.h>

#include "optim/optim_config.h"
#include "optim/optim.h"

using namespace hpctrain;

namespace {
OptimConfig wsd(int64_t warmup, double frac, double min_lr = 0) {
  OptimConfig c;
  c.schedule = "wsd";
  c.warmup_steps = warmup;
  c.decay_frac = frac;
  c.min_lr = min_lr;
  return c;
}
}  // namespace

TEST(WsdSchedule, WarmupThenStableThenLinearDecayOverTheLastFraction) {
  // 100 steps, 10 warmup, decay over the last 20 (steps 80..99).
  LrSchedule s(wsd(10, 0.2), 1.0, 100);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.1);  // warmup: (step + 1) / warmup
  EXPECT_DOUBLE_EQ(s.lr_at(4), 0.5);
  EXPECT_DOUBLE_EQ(s.lr_at(9), 1.0);
  for (int64_t t = 10; t < 80; ++t) EXPECT_DOUBLE_EQ(s.lr_at(t), 1.0) << "stable phase, step " << t;
  for (int64_t k = 0; k < 20; ++k) EXPECT_DOUBLE_EQ(s.lr_at(80 + k), (20.0 - k) / 20.0) << "decay step " << k;
  EXPECT_DOUBLE_EQ(s.lr_at(99), 0.05);  // one step before the lr would reach min_lr
  EXPECT_DOUBLE_EQ(s.lr_at(100), 0.0);  // (past the end: min_lr)
}

TEST(WsdSchedule, DecaysToMinLrAndRoundsTheDecayLengthUp) {
  // 0.3 x 10 = 3.0000000000000004 in binary: the decay is 3 steps, not 4.
  LrSchedule s(wsd(0, 0.3, 0.1), 1.0, 10);
  for (int64_t t = 0; t < 7; ++t) EXPECT_DOUBLE_EQ(s.lr_at(t), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(7), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(8), 0.1 + 0.9 * 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.lr_at(9), 0.1 + 0.9 * 1.0 / 3.0);
  // 0.25 x 10 = 2.5: 3 decay steps as well.
  LrSchedule r(wsd(0, 0.25), 2.0, 10);
  EXPECT_DOUBLE_EQ(r.lr_at(6), 2.0);
  EXPECT_DOUBLE_EQ(r.lr_at(7), 2.0);
  EXPECT_DOUBLE_EQ(r.lr_at(8), 2.0 * 2.0 / 3.0);
}

TEST(WsdSchedule, DecayFractionOneIsALinearDecayFromTheFirstStep) {
  LrSchedule s(wsd(0, 1.0), 1.0, 4);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(1), 0.75);
  EXPECT_DOUBLE_EQ(s.lr_at(2), 0.5);
  EXPECT_DOUBLE_EQ(s.lr_at(3), 0.25);
}

TEST(WsdSchedule, CosineEndsAtMinLr) {
  OptimConfig c = wsd(0, 0.2, 0.2);
  c.schedule = "cosine";
  LrSchedule s(c, 1.0, 100);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 1.0);
  EXPECT_NEAR(s.lr_at(50), 0.6, 1e-12);  // halfway: min + (base - min) / 2
  EXPECT_NEAR(s.lr_at(100), 0.2, 1e-12);
}
