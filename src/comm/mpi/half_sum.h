// MPI reduction operators for 16-bit floats (bfloat16, float16), so half-precision gradients
// cross the network as 16 bits instead of being widened to float32 first.
//
// Contract:
// - half_sum_op(kBFloat16 | kHalf) returns a commutative MPI_Op for MPI_UINT16_T buffers that
//   hold those bits: each pairwise combine converts both operands to float32, adds, and rounds
//   once to the 16-bit type (round to nearest even), as NCCL's bf16/fp16 sums do. An N-rank sum
//   therefore rounds N-1 times (PyTorch's bf16_compress_hook has the same property).
// - Created on first use (after MPI_Init, from any thread; thread-safe), never freed (MPI_Finalize
//   frees user operators). Any other dtype throws hpctrain::Error.
// - widen_half / narrow_half convert n values between those bits and float32 (narrow rounds to
//   nearest even); any other dtype throws hpctrain::Error.
#pragma once

#include <c10/core/ScalarType.h>
#include <mpi.h>

#include <cstdint>

namespace hpctrain {

MPI_Op half_sum_op(c10::ScalarType dtype);
void widen_half(c10::ScalarType dtype, const uint16_t* in, float* out, int64_t n);
void narrow_half(c10::ScalarType dtype, const float* in, uint16_t* out, int64_t n);

}  // namespace hpctrain
