// Collective benchmarks: our MpiCommunicator against the bare MPI call on the same buffers
// (allreduce: MPI_Allreduce; reduce_scatter: MPI_Reduce_scatter_block; allgather:
// MPI_Allgather, our allgather_into). Collective: every rank calls it with the same arguments.
// Bandwidths follow nccl-tests: `bytes` is the whole buffer (n blocks for reduce_scatter and
// allgather), algbw = bytes / time, busbw = algbw * 2(n-1)/n for allreduce and
// algbw * (n-1)/n for reduce_scatter and allgather.
// Allreduce in bfloat16 (`bf16`): ours reduces a bfloat16 tensor (bytes/2 elements); bare MPI
// runs MPI_Allreduce on the same bytes with the same 16-bit sum operator (comm/mpi/half_sum.h).
// Every size is also checked once, before it is timed (as nccl-tests' #wrong): ours and the bare
// call run on the same rank-dependent integer values, whose sums are exact in any order, and
// `wrong` counts the elements, summed over ranks, where ours differs from the bare call's result.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain {

class MpiCommunicator;

struct AllreduceBenchRow {
  int64_t bytes = 0;
  int iters = 0;
  double time_us = 0, algbw_GBps = 0, busbw_GBps = 0;              // ours
  double mpi_time_us = 0, mpi_algbw_GBps = 0, mpi_busbw_GBps = 0;  // the bare MPI call
  int64_t wrong = 0;  // elements (all ranks) where ours differed from the bare call; 0 = correct
};

// Sizes double from min_bytes to max_bytes. `iters` is the count at <= 4 MiB; larger sizes
// scale it down (at least 5). Ours and bare MPI alternate in rounds; each reports its
// median round, slowest rank.
std::vector<AllreduceBenchRow> bench_allreduce(MpiCommunicator& comm, int64_t min_bytes, int64_t max_bytes, int iters);
// The same for `op`: "allreduce", "reduce_scatter" or "allgather" (else hpctrain::Error).
std::vector<AllreduceBenchRow> bench_collective(MpiCommunicator& comm, const std::string& op, int64_t min_bytes,
                                                int64_t max_bytes, int iters, bool bf16 = false);

}  // namespace hpctrain
