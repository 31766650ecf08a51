// How MpiCommunicator reduces a CPU tensor (private to comm/mpi/; not installed as API).
//
// Contract:
// - Paths names the reduction path of one communicator, chosen once at its construction: `hier`
//   (HierAllreduce: several hosts, some with several ranks), `shm` (ShmAllreduce: every rank on
//   one host), or neither (MPI_Allreduce over `comm`). At most one of hier and shm is set.
// - reduce_tensor() reduces a contiguous CPU tensor in place over that path, collective like the
//   path itself. Half types (float16/bfloat16) summed across hosts (half_on_wire()) travel as
//   16 bits with half_sum_op (each combine in float32, rounded); otherwise they are staged in
//   float32 and rounded once. kAvg divides by `world` afterwards (in float32 for half types).
// - reduce_scatter_hier() is reduce_scatter on the hierarchical path (p.hier set): `input` holds
//   `world` blocks of output.numel() elements (clobbered), `output` gets this rank's block of the
//   reduction. Half-type sums go through HierAllreduce::reduce_scatter_half, half max/min through
//   float32. false (nothing touched) for a type the path does not take (the caller then uses MPI).
// - mpi_type/mpi_op map dtypes and ops to MPI (MPI_DATATYPE_NULL / MPI_OP_NULL when none);
//   MPI counts are int, so buffers go in pieces of kChunk elements.
#pragma once

#include <ATen/core/Tensor.h>
#include <mpi.h>

#include <climits>
#include <cstdint>

#include "comm/communicator.h"

namespace hpctrain {

class ShmAllreduce;
class HierAllreduce;

namespace mpi_detail {

constexpr int64_t kChunk = INT_MAX / 16;

MPI_Datatype mpi_type(at::ScalarType s);
MPI_Op mpi_op(ReduceOp op);
inline bool is_half(at::ScalarType s) { return s == at::kHalf || s == at::kBFloat16; }

struct Paths {
  MPI_Comm comm = MPI_COMM_NULL;
  ShmAllreduce* shm = nullptr;    // every rank on one host
  HierAllreduce* hier = nullptr;  // several hosts, some with several ranks
  bool multi_node = false;
  // Half-type sums cross a network as 16 bits; inside one host they are staged in float32.
  bool half_on_wire() const { return hier || (multi_node && !shm); }
};

void reduce_tensor(at::Tensor& t, ReduceOp op, int world, const Paths& p);
bool reduce_scatter_hier(at::Tensor& input, at::Tensor& output, ReduceOp op, int world, const Paths& p);

}  // namespace mpi_detail
}  // namespace hpctrain
