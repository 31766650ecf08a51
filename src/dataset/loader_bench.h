// Loader benchmark (`hpctrain bench loader`): throughput of the prefetching loader over all
// ranks and its data-wait time, on one data file. Collective on `comm`: every rank calls it with
// the same options (each reads its own shard of the samples).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

namespace hpctrain {

struct LoaderBenchOptions {
  std::string data;                           // an HDF5 file or a data directory (as Loader takes it)
  int64_t batch_size = 128, max_batches = 0;  // 0: one epoch
  double compute_ms = 0;                      // simulated per-batch compute (sleep), to show prefetch hiding the reads
  int prefetch = 2;
  bool augment = false;
};

struct LoaderBenchResult {
  int64_t batches = 0;     // per rank
  int64_t samples = 0;     // over all ranks
  double wall_s = 0;       // the slowest rank's
  double data_wait_s = 0;  // the slowest rank's
  double samples_per_s() const { return wall_s > 0 ? static_cast<double>(samples) / wall_s : 0; }
};

// The result is complete on rank 0 (other ranks: their own batch count only).
LoaderBenchResult bench_loader(MPI_Comm comm, const LoaderBenchOptions& o);

}  // namespace hpctrain
