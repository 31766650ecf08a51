// The fp16 overflow verdict is agreed across ranks: an inf on one rank skips the step everywhere.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "support/test_world.h"
#include "optim/amp.h"

using namespace hpctrain;

TEST(LossScalerMpi, InfOnLastRankOnlySkipsEveryRank) {
  auto& w = hpctrain::testing::world();
  LossScaler s(true);
  at::Tensor p = at::zeros({2}).requires_grad_();
  bool poisoned = w.rank() == w.size() - 1;
  p.mutable_grad() = at::full({2}, poisoned ? std::numeric_limits<float>::quiet_NaN() : 1.0f);
  EXPECT_FALSE(s.unscale_and_check({p}, hpctrain::testing::cpu_comm())) << "rank " << w.rank();
  p.mutable_grad() = at::ones({2});
  EXPECT_TRUE(s.unscale_and_check({p}, hpctrain::testing::cpu_comm()));
}
