// The reduction paths of MpiCommunicator (see reduce_paths.h).
#include "comm/mpi/reduce_paths.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "comm/mpi/half_sum.h"
#include "comm/mpi/hier_allreduce.h"
#include "comm/mpi/shm_allreduce.h"
#include "runtime/check.h"

namespace hpctrain::mpi_detail {

// The MPI datatype that carries `s` for reductions (half types are staged in float32).
MPI_Datatype mpi_type(at::ScalarType s) {
  switch (s) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kInt: return MPI_INT32_T;
    case at::kLong: return MPI_INT64_T;
    case at::kByte: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

namespace {

void allreduce_inplace(void* data, int64_t count, MPI_Datatype type, size_t elem, MPI_Op op, const Paths& p) {
  if (p.hier && p.hier->allreduce(data, count, type, op)) return;
  if (p.shm && p.shm->allreduce(data, count, type, op)) return;
  auto* b = static_cast<char*>(data);
  for (int64_t off = 0; off < count; off += kChunk) {
    int n = static_cast<int>(std::min(kChunk, count - off));
    HPC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, b + off * elem, n, type, op, p.comm));
  }
}

}  // namespace

// Reduces a contiguous CPU tensor in place. Half types: summed as 16 bits on the wire across
// hosts (each combine in float32, rounded), otherwise staged through float32 and rounded once.
void reduce_tensor(at::Tensor& t, ReduceOp op, int world, const Paths& p) {
  if (t.numel() == 0) return;
  const bool sum = op == ReduceOp::kSum || op == ReduceOp::kAvg;
  if (is_half(t.scalar_type()) && sum && p.half_on_wire()) {
    auto* d = static_cast<uint16_t*>(t.data_ptr());
    if (p.hier) {
      p.hier->sum_half(d, t.numel(), t.scalar_type());
    } else {
      for (int64_t off = 0; off < t.numel(); off += kChunk)
        HPC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, d + off, static_cast<int>(std::min(kChunk, t.numel() - off)),
                                    MPI_UINT16_T, half_sum_op(t.scalar_type()), p.comm));
    }
    if (op == ReduceOp::kAvg) t.copy_(t.to(at::kFloat).div_(world));
    return;
  }
  if (is_half(t.scalar_type()) && sum && p.shm &&
      p.shm->sum_half(static_cast<uint16_t*>(t.data_ptr()), t.numel(), t.scalar_type())) {  // float32 sums, rounded once
    if (op == ReduceOp::kAvg) t.copy_(t.to(at::kFloat).div_(world));
    return;
  }
  at::Tensor buf = is_half(t.scalar_type()) ? t.to(at::kFloat) : t;
  allreduce_inplace(buf.data_ptr(), buf.numel(), mpi_type(buf.scalar_type()), buf.element_size(), mpi_op(op), p);
  if (op == ReduceOp::kAvg) buf.div_(world);
  if (!buf.is_same(t)) t.copy_(buf);
}

bool reduce_scatter_hier(at::Tensor& input, at::Tensor& output, ReduceOp op, int world, const Paths& p) {
  const bool sum = op == ReduceOp::kSum || op == ReduceOp::kAvg;
  const int64_t n = output.numel();
  if (is_half(input.scalar_type()) && sum) {
    p.hier->reduce_scatter_half(static_cast<uint16_t*>(input.data_ptr()), static_cast<uint16_t*>(output.data_ptr()), n,
                                input.scalar_type());
    if (op == ReduceOp::kAvg) output.copy_(output.to(at::kFloat).div_(world));
    return true;
  }
  at::Tensor in = is_half(input.scalar_type()) ? input.to(at::kFloat) : input;
  at::Tensor out = is_half(input.scalar_type()) ? at::empty({n}, in.options()) : output;
  if (!p.hier->reduce_scatter(in.data_ptr(), out.data_ptr(), n, mpi_type(in.scalar_type()), mpi_op(op))) return false;
  if (op == ReduceOp::kAvg) out.div_(world);
  if (!out.is_same(output)) output.view({-1}).copy_(out.view({-1}));
  return true;
}

}  // namespace hpctrain::mpi_detail
