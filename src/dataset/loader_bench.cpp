// `hpctrain bench loader`: after a barrier every rank reads its shard through Loader, sleeping
// compute_ms per batch if asked; wall and data-wait time reduce to rank 0 as maxima, samples
// as a sum.
#include "dataset/loader_bench.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "dataset/batch.h"
#include "dataset/loader.h"
#include "runtime/check.h"
#include "runtime/clock.h"

namespace hpctrain {

LoaderBenchResult bench_loader(MPI_Comm comm, const LoaderBenchOptions& a) {
  int rank = 0, size = 1;
  HPC_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  HPC_MPI_CHECK(MPI_Comm_size(comm, &size));
  LoaderOptions o;
  o.batch_size = a.batch_size, o.prefetch = a.prefetch, o.augment = a.augment;
  Loader loader(a.data, size, rank, o);
  LoaderBenchResult r;
  r.batches = a.max_batches > 0 ? std::min(a.max_batches, loader.batches_per_epoch()) : loader.batches_per_epoch();
  HPC_MPI_CHECK(MPI_Barrier(comm));
  const auto t0 = std::chrono::steady_clock::now();
  long long samples = 0;
  for (int64_t b = 0; b < r.batches; ++b) {
    samples += loader.next()->images.size(0);
    if (a.compute_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(a.compute_ms));
  }
  double wall = seconds_since(t0), wait = loader.data_wait_seconds();
  long long all = 0;
  HPC_MPI_CHECK(MPI_Reduce(&wall, &r.wall_s, 1, MPI_DOUBLE, MPI_MAX, 0, comm));
  HPC_MPI_CHECK(MPI_Reduce(&wait, &r.data_wait_s, 1, MPI_DOUBLE, MPI_MAX, 0, comm));
  HPC_MPI_CHECK(MPI_Reduce(&samples, &all, 1, MPI_LONG_LONG, MPI_SUM, 0, comm));
  r.samples = all;
  return r;
}

}  // namespace hpctrain
