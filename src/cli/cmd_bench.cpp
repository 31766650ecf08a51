// `hpctrain bench allreduce|reduce_scatter|allgather`: one JSON line per message size, ours
// against the bare MPI call, with `wrong` (elements where ours differed from it; exit 1 if any).
#include <cstdio>
#include <cstdlib>
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
  std::string allreduce = "auto", dtype = "fp32";
  double link_gbit = 0;  // each host's link rate, for the fraction of the physical limit
};

// The least time any `op` on `bytes` (the whole buffer) can take over hosts whose links carry
// `gbit`: for an allreduce each host must send (and receive) 2 (H-1)/H of the buffer, for a
// reduce_scatter or allgather (H-1)/H (even hosts). 0 when there is no link to cross.
double link_limit_us(const std::string& op, int64_t bytes, int hosts, double gbit) {
  if (hosts < 2 || gbit <= 0) return 0;
  const double share = (op == "allreduce" ? 2.0 : 1.0) * (hosts - 1) / hosts;
  return share * bytes * 8 / (gbit * 1e9) * 1e6;
}

int bench(World& w, const std::string& op, const BenchArgs& a) {
  if (a.min_bytes <= 0 || a.max_bytes < a.min_bytes || a.iters <= 0)
    throw CollectiveError("bench " + op + ": need 0 < --min-bytes <= --max-bytes and --iters > 0");
  if (a.dtype != "fp32" && a.dtype != "bf16") throw CollectiveError("bench: --dtype " + a.dtype + " is not fp32|bf16");
  CommSettings cs = CommSettings::from_env();
  cs.allreduce = parse_allreduce_algo(a.allreduce);
  MpiCommunicator comm(w.mpi_comm(), cs);
  if (w.rank() == 0) {
    for (const auto& line : comm.describe_algorithms()) std::fprintf(stderr, "bench: %s\n", line.c_str());
    if (a.link_gbit > 0 && w.node_count() < 2)
      std::fprintf(stderr, "bench: --link-gbit: every rank is on one host, no link to cross: no link_frac\n");
  }
  int64_t wrong_sizes = 0;
  for (const auto& r : bench_collective(comm, op, a.min_bytes, a.max_bytes, a.iters, a.dtype == "bf16")) {
    wrong_sizes += r.wrong > 0;
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
                        {"busbw_ratio", r.mpi_busbw_GBps > 0 ? r.busbw_GBps / r.mpi_busbw_GBps : 0},
                        {"wrong", r.wrong},
                        {"allreduce", a.allreduce},
                        {"dtype", a.dtype}};
    if (double lim = link_limit_us(op, r.bytes, w.node_count(), a.link_gbit); lim > 0) {
      j["link_limit_us"] = lim;
      j["link_frac"] = lim / r.time_us;
      j["mpi_link_frac"] = lim / r.mpi_time_us;
    }
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  // `wrong` is summed over ranks, so every rank agrees on the exit status.
  if (wrong_sizes == 0) return 0;
  if (w.rank() == 0)
    std::fprintf(stderr, "hpctrain bench %s: WRONG results at %lld sizes (\"wrong\" > 0: elements that differ from the bare MPI call's)\n",
                 op.c_str(), static_cast<long long>(wrong_sizes));
  return 1;
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
    ar->add_option("--allreduce", args->allreduce, "our reduction path: auto, flat or hierarchical")
        ->check(CLI::IsMember({"auto", "flat", "hierarchical"}))
        ->type_name("{auto,flat,hierarchical}");
    if (std::string(name) == "allreduce")
      ar->add_option("--dtype", args->dtype, "fp32, or bf16 (16 bits on the wire)")->check(CLI::IsMember({"fp32", "bf16"}))->type_name("{fp32,bf16}");
    ar->add_option("--link-gbit", args->link_gbit,
                   "each host's link rate in Gbit/s (> 0; not given: no link columns): adds link_limit_us (the least time the collective needs: "
                   "2(H-1)/H of the bytes per host for allreduce, (H-1)/H for reduce_scatter and allgather) "
                   "and link_frac (that / ours)")
        ->check(CLI::Validator(
            [](std::string& v) { return std::strtod(v.c_str(), nullptr) > 0 ? std::string() : "must be > 0 Gbit/s, not " + v; },
            "", "positive"));
    std::string op = name;
    ar->callback([&chosen, args, op] { chosen = [args, op](World& w) { return bench(w, op, *args); }; });
  }
}

CommandRegistrar reg(20, add);

}  // namespace
}  // namespace hpctrain
