// CUDA paths at world size 1 (ctest label gpu). Skipped with a message without a GPU.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/optim/sgd.h>

#include "comm/router.h"
#include "ddp/ddp.h"
#include "model/models.h"
#include "runtime/device.h"
#include "support/test_world.h"
#include "optim/amp.h"

using namespace hpctrain;

#define REQUIRE_GPU() \
  if (visible_cuda_devices() == 0) GTEST_SKIP() << "no GPU visible: CUDA test skipped"

TEST(CudaDdp, WorldOfOneEqualsPlainTraining) {
  REQUIRE_GPU();
  activate_device({true, 0});
  DeviceRouter comm(hpctrain::testing::world().mpi_comm(), 0);
  c10::Device dev(c10::kCUDA, 0);
  torch::manual_seed(1);
  auto a = make_model("mlp", {1, 28, 28}, 10);
  torch::manual_seed(1);
  auto b = make_model("mlp", {1, 28, 28}, 10);
  a->to(dev);
  b->to(dev);
  DistributedDataParallel ddp(a.ptr(), comm);
  torch::optim::SGD oa(a->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD ob(b->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int s = 0; s < 5; ++s) {
    at::Tensor x = at::randn({32, 1, 28, 28}, dev), y = at::randint(0, 10, {32}, dev);
    ddp.backward(at::cross_entropy_loss(a->forward(x), y));
    oa.step();
    ddp.zero_grad();
    ob.zero_grad();
    at::cross_entropy_loss(b->forward(x), y).backward();
    ob.step();
  }
  auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(at::allclose(pa[i], pb[i], 1e-5, 1e-6)) << i;
}

TEST(CudaAmp, Fp16ScalerSkipsAProvokedOverflowAndBf16Trains) {
  REQUIRE_GPU();
  activate_device({true, 0});
  c10::Device dev(c10::kCUDA, 0);
  LossScaler s(true);
  at::Tensor p = at::zeros({4}, dev).requires_grad_();
  p.mutable_grad() = at::full({4}, std::numeric_limits<float>::infinity(), dev);
  EXPECT_FALSE(s.unscale_and_check({p}, hpctrain::testing::cpu_comm()));
  s.update(true);
  EXPECT_EQ(s.scale(), 32768.0);
  {
    AutocastScope scope("fp16", true);
    EXPECT_EQ(at::mm(at::randn({8, 8}, dev), at::randn({8, 8}, dev)).scalar_type(), at::kHalf);
  }
  {
    AutocastScope scope("bf16", true);
    EXPECT_EQ(at::mm(at::randn({8, 8}, dev), at::randn({8, 8}, dev)).scalar_type(), at::kBFloat16);
  }
}
