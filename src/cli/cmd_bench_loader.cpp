// `hpctrain bench loader`: loader throughput (samples/s over all ranks) and data-wait time on a
// data file. Added under the existing `bench` command (registered after it, by order).
#include <chrono>
#include <cstdio>
#include <thread>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "dataset/loader.h"
#include "runtime/check.h"
#include "runtime/world.h"

namespace hpctrain {
namespace {

struct LoaderBenchArgs {
  std::string data;
  int64_t batch_size = 128, max_batches = 0;
  double compute_ms = 0;  // simulated per-batch compute, to show prefetch hiding the reads
  int prefetch = 2;
  bool augment = false;
};

int bench_loader(World& w, const LoaderBenchArgs& a) {
  LoaderOptions o;
  o.batch_size = a.batch_size, o.prefetch = a.prefetch, o.augment = a.augment;
  Loader loader(a.data, w.size(), w.rank(), o);
  const int64_t limit = a.max_batches > 0 ? std::min(a.max_batches, loader.batches_per_epoch())
                                          : loader.batches_per_epoch();
  HPC_MPI_CHECK(MPI_Barrier(w.comm()));
  const auto t0 = std::chrono::steady_clock::now();
  int64_t samples = 0;
  for (int64_t b = 0; b < limit; ++b) {
    samples += loader.next()->images.size(0);
    if (a.compute_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(a.compute_ms));
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double max_wall = 0, wait = loader.data_wait_seconds(), max_wait = 0;
  long long total = samples, all = 0;
  HPC_MPI_CHECK(MPI_Reduce(&wall, &max_wall, 1, MPI_DOUBLE, MPI_MAX, 0, w.comm()));
  HPC_MPI_CHECK(MPI_Reduce(&wait, &max_wait, 1, MPI_DOUBLE, MPI_MAX, 0, w.comm()));
  HPC_MPI_CHECK(MPI_Reduce(&total, &all, 1, MPI_LONG_LONG, MPI_SUM, 0, w.comm()));
  if (w.rank() == 0) {
    nlohmann::json j = {{"world_size", w.size()},   {"batch_size", a.batch_size},
                        {"prefetch", a.prefetch},   {"augment", a.augment},
                        {"compute_ms", a.compute_ms},
                        {"batches", limit},         {"samples", all},
                        {"wall_s", max_wall},       {"samples_per_s", max_wall > 0 ? all / max_wall : 0},
                        {"data_wait_s", max_wait}};
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}

void add(CLI::App& root, Action& chosen) {
  auto* bench = root.get_subcommand("bench");  // created by cmd_bench.cpp (order 20)
  auto* cmd = bench->add_subcommand("loader", "loader throughput (samples/s) and data-wait time");
  auto args = std::make_shared<LoaderBenchArgs>();
  cmd->add_option("--data", args->data, "HDF5 file, e.g. data/fmnist/train.h5")->required();
  cmd->add_option("--batch-size", args->batch_size, "per rank")->capture_default_str();
  cmd->add_option("--prefetch", args->prefetch, "batches ahead; 0 = synchronous")->capture_default_str();
  cmd->add_option("--max-batches", args->max_batches, "stop after N batches (0 = one epoch)");
  cmd->add_option("--compute-ms", args->compute_ms, "simulated compute per batch (sleep)");
  cmd->add_flag("--augment", args->augment, "random crop + flip");
  cmd->callback([&chosen, args] { chosen = [args](World& w) { return bench_loader(w, *args); }; });
}

CommandRegistrar reg(21, add);

}  // namespace
}  // namespace hpctrain
