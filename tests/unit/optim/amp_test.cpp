#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include "runtime/check.h"
#include "support/test_world.h"
#include "optim/amp.h"

using namespace hpctrain;

TEST(Amp, Fp16OnCpuIsRefusedWithAReason) {
  try {
    check_amp("fp16", /*cuda=*/false);
    FAIL();
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("--amp fp16 needs a CUDA device"), std::string::npos);
  }
  EXPECT_NO_THROW(check_amp("bf16", false));
  EXPECT_NO_THROW(check_amp("fp16", true));
}

TEST(Amp, Bf16AutocastScopeOnCpuComputesMatmulsInBf16AndRestores) {
  at::Tensor a = at::randn({4, 4}), b = at::randn({4, 4});
  {
    AutocastScope scope("bf16", false);
    EXPECT_EQ(at::mm(a, b).scalar_type(), at::kBFloat16);
  }
  EXPECT_EQ(at::mm(a, b).scalar_type(), at::kFloat);
  EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
}

TEST(LossScaler, OverflowSkipsAndHalvesGoodStepsDouble) {
  LossScaler s(true, 65536.0, 2.0, 0.5, /*growth_interval=*/3);
  at::Tensor p = at::zeros({3}).requires_grad_();
  p.mutable_grad() = at::full({3}, 65536.0 * 2);
  EXPECT_TRUE(s.unscale_and_check({p}, hpctrain::testing::cpu_comm()));
  EXPECT_TRUE(at::allclose(p.grad(), at::full({3}, 2.0)));  // unscaled
  s.update(false);
  p.mutable_grad() = at::full({3}, std::numeric_limits<float>::infinity());
  EXPECT_FALSE(s.unscale_and_check({p}, hpctrain::testing::cpu_comm()));
  s.update(true);
  EXPECT_EQ(s.scale(), 32768.0);
  EXPECT_EQ(s.skipped_steps(), 1);
  for (int i = 0; i < 3; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 65536.0);  // x2 after growth_interval good steps
  EXPECT_EQ(at::scalar_tensor(1.0).item<double>(), s.scale_loss(at::scalar_tensor(1.0 / 65536)).item<double>());
}
