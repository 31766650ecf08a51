// hang_probe: a small purpose-built program for the watchdog e2e tests
// (tests/e2e/test_watchdog_*.sh). It runs a training-like loop of collectives through a
// DeviceRouter (settings from HPCTRAIN_COLLECTIVE_TIMEOUT / HPCTRAIN_DEBUG_COLLECTIVES) and
// misbehaves on purpose at step K:
//   ok      nobody misbehaves; the last rank is slow (sleeps 40% of the timeout) before each
//           step's first collective: must not trip the watchdog. Prints "hang_probe: ok".
//   skip    the last rank skips ddp.bucket[1] and then sleeps (a rank stuck outside MPI)
//   desync  rank 1 calls broadcast(int64, 1) from "sampler" where the others call ddp.bucket[1]
//   kill    the last rank SIGKILLs itself before ddp.bucket[1]
//   throw   rank 1 throws an hpctrain::Error before ddp.bucket[1]
//   throw_all  every rank throws there (simultaneous MPI_Abort from every rank)
// Each step: allreduce(float32, 1024) from ddp.bucket[0..2], so op #(3K+2) is step K's bucket[1].
// Usage: hang_probe SCENARIO [K=2] [STEPS=5]
#include <ATen/ATen.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "comm/guard/op_guard.h"
#include "comm/router.h"
#include "runtime/check.h"
#include "runtime/guard.h"
#include "runtime/world.h"

using namespace hpctrain;

namespace {

int probe(World& w, const std::string& scenario, int k, int steps) {
  DeviceRouter comm(w.mpi_comm(), -1);
  const double timeout = CommSettings::from_env().collective_timeout_s;
  const int last = w.size() - 1;
  for (int step = 0; step < steps; ++step) {
    set_current_step(step);
    if (scenario == "ok" && w.rank() == last) std::this_thread::sleep_for(std::chrono::duration<double>(0.4 * timeout));
    for (int b = 0; b < 3; ++b) {
      std::string tag = "ddp.bucket[" + std::to_string(b) + "]";
      if (step == k && b == 1) {
        if (scenario == "skip" && w.rank() == last) {
          std::this_thread::sleep_for(std::chrono::hours(1));
          continue;
        }
        if (scenario == "kill" && w.rank() == last) std::raise(SIGKILL);
        if ((scenario == "throw" && w.rank() == 1) || scenario == "throw_all")
          throw Error("hang_probe: injected failure at step " + std::to_string(step));
        if (scenario == "desync" && w.rank() == 1) {
          comm.broadcast(at::zeros({1}, at::kLong), 0, "sampler")->wait();
          continue;
        }
      }
      at::Tensor t = at::full({1024}, static_cast<float>(w.rank() + 1), at::kFloat);
      comm.allreduce(t, ReduceOp::kSum, tag)->wait();
      float want = w.size() * (w.size() + 1) / 2.0f;
      if (t[0].item<float>() != want || t[1023].item<float>() != want)
        throw Error("hang_probe: wrong sum " + std::to_string(t[0].item<float>()) + ", want " + std::to_string(want));
    }
  }
  if (w.rank() == 0) std::printf("hang_probe: ok (%d steps)\n", steps);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenario = argc > 1 ? argv[1] : "ok";
  int k = argc > 2 ? std::atoi(argv[2]) : 2;
  int steps = argc > 3 ? std::atoi(argv[3]) : 5;
  return run_guarded(argc, argv, [&](World& w) { return probe(w, scenario, k, steps); });
}
