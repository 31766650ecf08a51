// Allreduce benchmark: our MpiCommunicator against a bare MPI_Allreduce on the same buffers.
// Collective: every rank calls it with the same arguments. Bandwidths follow nccl-tests:
// algbw = bytes / time, busbw = algbw * 2(n-1)/n.
#pragma once

#include <cstdint>
#include <vector>

namespace hpctrain {

class MpiCommunicator;

struct AllreduceBenchRow {
  int64_t bytes = 0;
  int iters = 0;
  double time_us = 0, algbw_GBps = 0, busbw_GBps = 0;          // ours
  double mpi_time_us = 0, mpi_algbw_GBps = 0, mpi_busbw_GBps = 0;  // bare MPI_Allreduce
};

// Sizes double from min_bytes to max_bytes. `iters` is the count at <= 4 MiB; larger sizes
// scale it down (at least 5). Ours and bare MPI alternate in rounds; each reports its
// median round, slowest rank.
std::vector<AllreduceBenchRow> bench_allreduce(MpiCommunicator& comm, int64_t min_bytes,
                                               int64_t max_bytes, int iters);

}  // namespace hpctrain
