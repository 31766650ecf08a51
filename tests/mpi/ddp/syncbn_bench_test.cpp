// Benchmark, not a test (DISABLED_, so ctest never runs it): SyncBatchNorm forward+backward
// against torch's BatchNorm2d on a [64,32,28,28] local batch. Run it with perf/syncbn_bench.sh.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "support/syncbn_test_util.h"
#include "support/test_world.h"

using namespace hpctrain;
using hpctrain::testing::world;

namespace {

template <typename F>
double median_ms(F&& step, int iters) {
  std::vector<double> t;
  for (int i = 0; i < iters + 2; ++i) {
    hpctrain::testing::cpu_comm().barrier("bench")->wait();  // ranks start each step together
    auto t0 = std::chrono::steady_clock::now();
    step();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  t.erase(t.begin(), t.begin() + 2);  // warm-up
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

TEST(SyncBnBench, DISABLED_ForwardBackwardVsBatchNorm2d) {
  auto opts = torch::nn::BatchNormOptions(32);
  hpctrain::testing::ReferenceBN bn(4, opts);
  SyncBatchNorm sbn(opts, &hpctrain::testing::cpu_comm(), "bench");
  at::Tensor x = at::randn({64, 32, 28, 28}).requires_grad_(), dy = at::randn_like(x);
  auto run = [&](auto&& fwd) { return [&, fwd] { (fwd(x) * dy).sum().backward(); }; };
  double t_bn = median_ms(run([&](const at::Tensor& v) { return bn.forward(v); }), 10);
  double t_sync = median_ms(run([&](const at::Tensor& v) { return sbn->forward(v); }), 10);
  if (world().rank() == 0)
    std::printf(
        "{\"world_size\":%d,\"shape\":\"64x32x28x28\",\"bn_ms\":%.2f,\"syncbn_ms\":%.2f,"
        "\"ratio\":%.2f}\n",
        world().size(), t_bn, t_sync, t_sync / t_bn);
}
