// A measured peak of this process's matrix multiply: the denominator of MFU on a CPU, where no
// vendor peak applies (threads, SIMD width and clocks vary).
//
// Contract: measure_cpu_gemm_flops(seconds) runs float32 n x n x n matrix products (n = 512) on
// the CPU with this process's intra-op threads (at::get_num_threads), one untimed warm-up, then
// as many as fit in `seconds` (at least 3), and returns the best rate seen, in FLOP/s (2 n^3 per
// product). No collective; nothing is allocated afterwards.
#pragma once

namespace hpctrain {

double measure_cpu_gemm_flops(double seconds = 0.3);

}  // namespace hpctrain
