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

}  // namespace

MPI_Op half_sum_op(c10::ScalarType dtype) {
  static std::once_flag once;
  static MPI_Op bf16 = MPI_OP_NULL, fp16 = MPI_OP_NULL;
  if (dtype != c10::kBFloat16 && dtype != c10::kHalf)
    throw Error(std::string("half_sum_op: ") + c10::toString(dtype) + " is not a 16-bit float type");
  std::call_once(once, [] {
    HPC_MPI_CHECK(MPI_Op_create(&sum16<c10::BFloat16>, /*commute=*/1, &bf16));
    HPC_MPI_CHECK(MPI_Op_create(&sum16<c10::Half>, /*commute=*/1, &fp16));
  });
  return dtype == c10::kBFloat16 ? bf16 : fp16;
}

}  // namespace hpctrain
