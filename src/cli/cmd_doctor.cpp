// `hpctrain doctor`: who and where every rank is, library versions, and a collective self-test.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <torch/version.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/open_run.h"
#include "comm/small_collectives.h"
#include "diag/bench.h"
#include "diag/host_pairs.h"
#include "diag/selftest.h"
#include "io/h5_util.h"
#include "runtime/build_id.h"
#include "runtime/check.h"
#include "runtime/device.h"
#include "runtime/versions.h"
#include "runtime/world.h"

namespace hpctrain {
namespace {

std::string blas_info() {
  std::string cfg = at::show_config();
  auto p = cfg.find("BLAS_INFO=");
  if (p == std::string::npos) return "unknown";
  auto e = cfg.find_first_of(", \n", p);
  return cfg.substr(p + 10, e - p - 10);
}

std::string env_or(const char* name, const char* dflt) {
  const char* v = std::getenv(name);
  return v ? v : dflt;
}

nlohmann::json rank_report(World& w, const DeviceChoice& dev) {
  nlohmann::json j;
  j["host"] = w.hostname();
  j["rank"] = w.rank();
  j["local_rank"] = w.local_rank();
  j["device"] = dev.str();
  j["gpu"] = dev.cuda ? cuda_device_name(dev.index) : "-";
  j["gpu_mem_gib"] = dev.cuda ? cuda_device_memory_gib(dev.index) : 0.0;
  j["visible_gpus"] = visible_cuda_devices();
  const nlohmann::json versions = library_versions();
  j["torch"] = versions["libtorch"];
  j["mpi"] = versions["mpi"];
  j["nccl"] = nccl_version_string().empty() ? "-" : nccl_version_string();
  j["hdf5"] = h5::library_version() +
              (h5::library_threadsafe() ? " (thread-safe)" : " (not thread-safe; hpctrain serializes its calls)");
  j["blas"] = blas_info();
  j["threads"] = at::get_num_threads();
  j["omp_num_threads"] = env_or("OMP_NUM_THREADS", "unset");
  j["build"] = build_id();
  std::string ifs;
  for (const auto& i : ipv4_interfaces()) ifs += (ifs.empty() ? "" : " ") + i;
  j["interfaces"] = ifs.empty() ? "-" : ifs;
  j["mpi_transport"] = mpi_transport_settings();
  return j;
}

void print_table(const std::vector<nlohmann::json>& reports, int nodes) {
  const auto& r0 = reports[0];
  std::printf("hpctrain doctor: %zu rank(s) on %d node(s)\n", reports.size(), nodes);
  std::printf("libraries (rank 0): LibTorch %s | %s | NCCL %s | HDF5 %s | BLAS %s\n",
              r0["torch"].get<std::string>().c_str(), r0["mpi"].get<std::string>().c_str(),
              r0["nccl"].get<std::string>().c_str(), r0["hdf5"].get<std::string>().c_str(),
              r0["blas"].get<std::string>().c_str());
  std::printf("%-5s %-6s %-20s %-8s %-26s %-8s %-8s %s\n", "rank", "local", "host", "device", "gpu", "mem_gib",
              "threads", "OMP_NUM_THREADS");
  for (const auto& r : reports) {
    std::printf("%-5d %-6d %-20s %-8s %-26s %-8.1f %-8d %s\n", r["rank"].get<int>(), r["local_rank"].get<int>(),
                r["host"].get<std::string>().c_str(), r["device"].get<std::string>().c_str(),
                r["gpu"].get<std::string>().c_str(), r["gpu_mem_gib"].get<double>(), r["threads"].get<int>(),
                r["omp_num_threads"].get<std::string>().c_str());
    for (const char* key : {"torch", "mpi", "nccl", "hdf5", "mpi_transport"})
      if (r[key] != r0[key])
        std::printf("  WARNING: rank %d has %s %s, rank 0 has %s\n", r["rank"].get<int>(), key,
                    r[key].get<std::string>().c_str(), r0[key].get<std::string>().c_str());
  }
}

// Per host: its IPv4 interfaces; then the MPI transport settings and, for every pair of hosts,
// the bandwidth and latency their leaders measured (a slow pair means a wrong interface).
void print_network(const std::vector<nlohmann::json>& reports, const std::vector<HostPairBandwidth>& pairs) {
  std::printf("network: MPI transport (rank 0): %s\n", reports[0]["mpi_transport"].get<std::string>().c_str());
  std::string last;
  for (const auto& r : reports) {
    const std::string host = r["host"].get<std::string>();
    if (host == last) continue;
    last = host;
    std::printf("network: %s interfaces: %s\n", host.c_str(), r["interfaces"].get<std::string>().c_str());
  }
  for (const auto& p : pairs)
    std::printf("network: %s <-> %s: %.2f GB/s (%lld-byte ping-pong, ranks %d<->%d), latency %.1f us\n",
                p.host_a.c_str(), p.host_b.c_str(), p.GBps, static_cast<long long>(p.bytes), p.rank_a, p.rank_b,
                p.latency_us);
  if (pairs.empty()) std::printf("network: one host, no host pairs to measure\n");
}

// Which algorithm each CPU collective uses and why; across hosts, what a 16 MiB allreduce
// reaches on each host's link next to the slowest host pair's measured bandwidth. Returns 1 on
// rank 0 when that allreduce's result differed from MPI_Allreduce's (a failed check), else 0.
int print_algorithms(World& w, DeviceRouter& comm, const std::vector<HostPairBandwidth>& pairs) {
  if (w.rank() == 0)
    for (const auto& line : comm.describe_algorithms()) std::printf("collectives: %s\n", line.c_str());
  auto* mpi = dynamic_cast<MpiCommunicator*>(&comm.backend(c10::kCPU));
  if (!mpi) return 0;
  if (w.node_count() < 2 || w.size() < 2) return 0;
  const int64_t bytes = 16 << 20;
  auto rows = bench_collective(*mpi, "allreduce", bytes, bytes, 5);
  if (w.rank() != 0 || rows.empty()) return 0;
  if (rows[0].wrong)
    std::fprintf(stderr, "hpctrain doctor: FAILED allreduce 16 MiB across hosts: %lld elements differ from MPI_Allreduce's\n",
                 static_cast<long long>(rows[0].wrong));
  const double h = w.node_count(), per_host = 2.0 * (h - 1) / h * rows[0].bytes;  // each host's share on its link
  double slowest = 0;
  for (const auto& p : pairs) slowest = slowest == 0 ? p.GBps : std::min(slowest, p.GBps);
  std::printf("collectives: allreduce 16 MiB: %.0f us, %.2f GB/s on each host's link (bare MPI_Allreduce %.0f us); "
              "slowest host pair measured %.2f GB/s%s\n",
              rows[0].time_us, per_host / (rows[0].time_us * 1e-6) / 1e9, rows[0].mpi_time_us, slowest,
              slowest > 0 ? (" -> " + std::to_string(static_cast<int>(100 * per_host / (rows[0].time_us * 1e-6) / 1e9 /
                                                                      slowest)) + "% of it").c_str()
                          : "");
  return rows[0].wrong ? 1 : 0;
}

int doctor(World& w, const std::string& device_spec, const std::string& allreduce) {
  CommSettings cs = CommSettings::from_env();
  cs.allreduce = parse_allreduce_algo(allreduce);
  RunContext run = open_run(w, device_spec, cs);
  const DeviceChoice& dev = run.dev;
  DeviceRouter& comm = *run.comm;

  // Gather every rank's report over the communicator (itself a first test of it).
  std::vector<std::string> parts = allgather_strings(comm, rank_report(w, dev).dump(), "doctor.report");
  auto pairs = measure_host_pairs(w.mpi_comm(), 4 << 20, 5);
  if (w.rank() == 0) {
    std::vector<nlohmann::json> reports;
    for (auto& p : parts) reports.push_back(nlohmann::json::parse(p));
    print_table(reports, w.node_count());
    print_network(reports, pairs);
  }
  int failed = print_algorithms(w, comm, pairs);
  std::vector<c10::Device> devices = {c10::Device(c10::kCPU)};
  if (dev.cuda) devices.emplace_back(c10::kCUDA, static_cast<c10::DeviceIndex>(dev.index));
  for (auto d : devices) {
    auto results = run_collective_selftest(comm, d);
    int bad = 0;
    for (auto& r : results)
      if (!r.ok) {
        ++bad;
        std::fprintf(stderr, "hpctrain doctor: rank %d: FAILED %s on %s: %s\n", w.rank(), r.check.c_str(),
                     d.str().c_str(), r.detail.c_str());
      }
    if (w.rank() == 0)
      std::printf("self-test on %s: %zu checks, %d failed on rank 0\n", d.str().c_str(), results.size(), bad);
    failed += bad;
  }
  int any = static_cast<int>(sum_over_ranks(comm, failed, "doctor.failed"));
  if (w.rank() == 0) std::printf(any ? "doctor: FAILED (%d failed checks over all ranks)\n" : "doctor: OK\n", any);
  return any ? 1 : 0;
}

void add(CLI::App& root, Action& chosen) {
  auto* cmd = root.add_subcommand("doctor", "report ranks, devices, libraries; self-test collectives");
  auto device = std::make_shared<std::string>("auto");
  cmd->add_option("--device", *device, "device of every rank")->type_name("auto|cpu|cuda|cuda:N");
  auto algo = std::make_shared<std::string>("auto");
  cmd->add_option("--allreduce", *algo, "CPU allreduce path to report and measure: auto, flat or hierarchical")
      ->check(CLI::IsMember({"auto", "flat", "hierarchical"}))
      ->type_name("{auto,flat,hierarchical}");
  cmd->callback([&chosen, device, algo] { chosen = [device, algo](World& w) { return doctor(w, *device, *algo); }; });
}

CommandRegistrar reg(10, add);

}  // namespace
}  // namespace hpctrain
