// NCCL backend on CUDA tensors. Skipped (with a message) on machines without a GPU.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "comm/router.h"
#include "diag/selftest.h"
#include "runtime/check.h"
#include "runtime/device.h"
#include "support/test_world.h"

using namespace hpctrain;

TEST(Nccl, SelfTestOnCudaTensors) {
#ifndef HPCTRAIN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  auto& w = hpctrain::testing::world();
  int gpus = visible_cuda_devices();
  if (gpus == 0) GTEST_SKIP() << "no GPU visible: NCCL test skipped";
  if (w.local_size() > gpus) GTEST_SKIP() << "more local ranks than GPUs: NCCL test skipped";
  DeviceChoice dev = choose_device("cuda", w.local_rank(), w.local_size(), gpus);
  activate_device(dev);
  DeviceRouter router(w.mpi_comm(), dev.index);
  c10::Device d(c10::kCUDA, static_cast<c10::DeviceIndex>(dev.index));
  for (auto& r : run_collective_selftest(router, d)) EXPECT_TRUE(r.ok) << r.check << ": " << r.detail;
  // Mixing devices in one operation names both.
  std::vector<at::Tensor> mixed = {at::ones({2}, d), at::ones({2})};
  EXPECT_THROW(router.allreduce(mixed, ReduceOp::kSum), Error);
#endif
}
