// measure_cpu_gemm_flops: at::mm on fixed random operands, timed one product at a time with the
// steady clock; the best product's rate (the least disturbed by other processes).
#include "runtime/peak_flops.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>

namespace hpctrain {

double measure_cpu_gemm_flops(double seconds) {
  constexpr int64_t n = 512;
  at::Tensor a = at::randn({n, n}), b = at::randn({n, n}), c = at::empty({n, n});
  at::mm_out(c, a, b);  // warm-up: threads started, pages touched
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  double best = 0;
  for (int k = 0; k < 3 || std::chrono::duration<double>(clock::now() - start).count() < seconds; ++k) {
    const auto t0 = clock::now();
    at::mm_out(c, a, b);
    const double dt = std::chrono::duration<double>(clock::now() - t0).count();
    if (dt > 0) best = std::max(best, 2.0 * n * n * n / dt);
  }
  return best;
}

}  // namespace hpctrain
