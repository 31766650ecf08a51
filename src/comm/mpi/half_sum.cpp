// half_sum_op: MPI_Op_create'd sums of bfloat16 / float16 bit patterns, computed in float32.
#include "comm/mpi/half_sum.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstring>
#include <mutex>

#include "runtime/check.h"

namespace hpctrain {
namespace {

template <typename H>
void sum16(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const H*>(in);
  auto* b = static_cast<H*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = H(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}

template <typename H>
void widen(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    H h;
    std::memcpy(&h, in + i, 2);
    out[i] = static_cast<float>(h);
  }
}

template <typename H>
void narrow(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    H h(in[i]);
    std::memcpy(out + i, &h, 2);
  }
}

void check_half(c10::ScalarType dtype, const char* who) {
  if (dtype != c10::kBFloat16 && dtype != c10::kHalf)
    throw Error(std::string(who) + ": " + c10::toString(dtype) + " is not a 16-bit float type");
}

}  // namespace

void widen_half(c10::ScalarType dtype, const uint16_t* in, float* out, int64_t n) {
  check_half(dtype, "widen_half");
  dtype == c10::kBFloat16 ? widen<c10::BFloat16>(in, out, n) : widen<c10::Half>(in, out, n);
}

void narrow_half(c10::ScalarType dtype, const float* in, uint16_t* out, int64_t n) {
  check_half(dtype, "narrow_half");
  dtype == c10::kBFloat16 ? narrow<c10::BFloat16>(in, out, n) : narrow<c10::Half>(in, out, n);
}

MPI_Op half_sum_op(c10::ScalarType dtype) {
  static std::once_flag once;
  static MPI_Op bf16 = MPI_OP_NULL, fp16 = MPI_OP_NULL;
  check_half(dtype, "half_sum_op");
  std::call_once(once, [] {
    HPC_MPI_CHECK(MPI_Op_create(&sum16<c10::BFloat16>, /*commute=*/1, &bf16));
    HPC_MPI_CHECK(MPI_Op_create(&sum16<c10::Half>, /*commute=*/1, &fp16));
  });
  return dtype == c10::kBFloat16 ? bf16 : fp16;
}

}  // namespace hpctrain
