// `hpctrain bench allreduce|reduce_scatter|allgather`: one JSON line per message size, ours
// against the bare MPI call.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "comm/mpi/mpi_communicator.h"
#include "diag/bench.h"
#include "runtime/check.h"
#include "runtime/world.h"

namespace hpctrain {
namespace {

struct BenchArgs {
  int64_t min_bytes = 4 << 10, max_bytes = 256 << 20;
  int iters = 20;
};

int bench(World& w, const std::string& op, const BenchArgs& a) {
  if (a.min_bytes <= 0 || a.max_bytes < a.min_bytes || a.iters <= 0)
    throw CollectiveError("bench " + op + ": need 0 < --min-bytes <= --max-bytes and --iters > 0");
  MpiCommunicator comm(w.mpi_comm());
  for (const auto& r : bench_collective(comm, op, a.min_bytes, a.max_bytes, a.iters)) {
    if (w.rank() != 0) continue;
    nlohmann::json j = {{"op", op},
                        {"world_size", w.size()},
                        {"bytes", r.bytes},
                        {"iters", r.iters},
                        {"time_us", r.time_us},
                        {"algbw_GBps", r.algbw_GBps},
                        {"busbw_GBps", r.busbw_GBps},
                        {"mpi_time_us", r.mpi_time_us},
                        {"mpi_algbw_GBps", r.mpi_algbw_GBps},
                        {"mpi_busbw_GBps", r.mpi_busbw_GBps},
                        {"busbw_ratio", r.mpi_busbw_GBps > 0 ? r.busbw_GBps / r.mpi_busbw_GBps : 0}};
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}

void add(CLI::App& root, Action& chosen) {
  auto* b = root.add_subcommand("bench", "benchmarks");
  b->require_subcommand(1);
  const std::pair<const char*, const char*> ops[] = {
      {"allreduce", "allreduce bandwidth, ours against bare MPI_Allreduce"},
      {"reduce_scatter", "reduce-scatter bandwidth (ZeRO-1 gradients), ours against bare MPI_Reduce_scatter_block"},
      {"allgather", "allgather bandwidth (ZeRO-1 parameters), ours against bare MPI_Allgather"}};
  for (const auto& [name, help] : ops) {
    auto* ar = b->add_subcommand(name, help);
    auto args = std::make_shared<BenchArgs>();
    ar->add_option("--min-bytes", args->min_bytes, "smallest message in bytes");
    ar->add_option("--max-bytes", args->max_bytes, "largest message in bytes");
    ar->add_option("--iters", args->iters, "iterations per size at <= 4 MiB (fewer above)");
    std::string op = name;
    ar->callback([&chosen, args, op] { chosen = [args, op](World& w) { return bench(w, op, *args); }; });
  }
}

CommandRegistrar reg(20, add);

}  // namespace
}  // namespace hpctrain
