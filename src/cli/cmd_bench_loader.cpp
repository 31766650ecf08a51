// `hpctrain bench loader`: loader throughput (samples/s over all ranks) and data-wait time on a
// data file. Added under the existing `bench` command (registered after it, by order).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "dataset/loader_bench.h"
#include "runtime/world.h"

namespace hpctrain {
namespace {

int run(World& w, const LoaderBenchOptions& a) {
  LoaderBenchResult r = bench_loader(w.mpi_comm(), a);
  if (w.rank() == 0) {
    nlohmann::json j = {{"world_size", w.size()},   {"batch_size", a.batch_size},
                        {"prefetch", a.prefetch},   {"augment", a.augment},
                        {"compute_ms", a.compute_ms},
                        {"batches", r.batches},     {"samples", r.samples},
                        {"wall_s", r.wall_s},       {"samples_per_s", r.samples_per_s()},
                        {"data_wait_s", r.data_wait_s}};
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}

void add(CLI::App& root, Action& chosen) {
  auto* bench = root.get_subcommand("bench");  // created by cmd_bench.cpp (order 20)
  auto* cmd = bench->add_subcommand("loader", "loader throughput (samples/s) and data-wait time");
  auto args = std::make_shared<LoaderBenchOptions>();
  cmd->add_option("--data", args->data, "HDF5 file, e.g. data/fmnist/train.h5")->required();
  cmd->add_option("--batch-size", args->batch_size, "per rank")->capture_default_str();
  cmd->add_option("--prefetch", args->prefetch, "batches ahead; 0 = synchronous")->capture_default_str();
  cmd->add_option("--max-batches", args->max_batches, "stop after N batches (0 = one epoch)");
  cmd->add_option("--compute-ms", args->compute_ms, "simulated compute per batch (sleep)");
  // As `train --augment`: a value true|false|1|0, or bare (true).
  cmd->add_option_function<std::string>(
         "--augment",
         [args](const std::string& v) {
           if (v.empty() || v == "true" || v == "1") args->augment = true;
           else if (v == "false" || v == "0") args->augment = false;
           else throw CLI::ValidationError("--augment", "expects true or false, got \"" + v + "\"");
         },
         "random crop + flip: true|false (bare --augment: true; default false)")
      ->expected(0, 1)
      ->default_str("");
  cmd->callback([&chosen, args] { chosen = [args](World& w) { return run(w, *args); }; });
}

CommandRegistrar reg(21, add);

}  // namespace
}  // namespace hpctrain
