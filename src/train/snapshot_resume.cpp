// SnapshotSession::pick (train/snapshot_session.h) for whole-state snapshots (DDP):
// every rank looks at its host's snapshots, one allreduce picks the newest (step, saving rank),
// and the ranks whose host holds no copy of it receive it over MPI from the lowest rank whose
// host does. ZeRO shards: snapshot_pick_shards.cpp. Then, for both, the clean-up of what
// the new run must not mistake for its own.
#include <mpi.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <tuple>

#include "metrics/progress.h"
#include "runtime/check.h"
#include "runtime/world.h"
#include "train/snapshot_copy.h"
#include "train/snapshot_layout.h"
#include "train/snapshot_session.h"

namespace hpctrain {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kRankBits = 20;  // a pick's key: step << 20 | (2^20 - 1 - saving rank)

struct Local {
  int64_t step = -1;
  int old_rank = -1;
  CheckpointState state;
};

// The newest snapshot of this job and config on this host that verifies (every checksum).
Local scan(const std::string& dir, const std::string& job, const std::string& config, int64_t global_batch, int rank) {
  std::vector<std::tuple<int64_t, int, std::string>> cands;  // (step, saving rank, path)
  static const std::regex rank_re("rank-([0-9]{5})"), step_re("step-([0-9]+)");
  std::error_code ec;
  for (const auto& r : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string rn = r.path().filename().string();
    if (!r.is_directory(ec) || !std::regex_match(rn, m, rank_re)) continue;
    const int old_rank = std::stoi(m[1]);
    std::error_code ec2;
    for (const auto& s : fs::directory_iterator(r.path(), ec2)) {
      std::smatch sm;
      const std::string sn = s.path().filename().string();
      if (s.is_directory(ec2) && std::regex_match(sn, sm, step_re) && fs::exists(s.path() / "manifest.json", ec2))
        cands.emplace_back(std::stoll(sm[1]), old_rank, s.path().string());
    }
  }
  std::sort(cands.begin(), cands.end(), [](const auto& a, const auto& b) {
    return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) > std::get<0>(b) : std::get<1>(a) < std::get<1>(b);
  });
  for (const auto& [step, old_rank, path] : cands)
    if (std::optional<CheckpointState> st = read_snapshot_checked(path, job, config, global_batch, rank))
      return {step, old_rank, std::move(*st)};
  return {};
}

// The same, never throwing: a rank that threw here would leave the others in the allreduce.
Local newest_on_host(const std::string& dir, const std::string& job, const std::string& config, int64_t global_batch,
                     int rank) {
  try {
    return scan(dir, job, config, global_batch, rank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hpctrain: rank %d: WARNING: cannot look at the snapshots in %s: %s\n", rank, dir.c_str(),
                 e.what());
    return {};
  }
}

}  // namespace

std::optional<CheckpointState> read_snapshot_checked(const std::string& path, const std::string& job,
                                                     const std::string& config, int64_t global_batch, int rank) {
  try {
    CheckpointState st = read_checkpoint(path, c10::kCPU);
    const nlohmann::json s = st.meta.value("snapshot", nlohmann::json::object());
    if (s.value("job", "") != job || s.value("config", "") != config ||
        s.value("global_batch", int64_t{-1}) != global_batch) {
      std::fprintf(stderr, "hpctrain: rank %d: note: ignoring snapshot %s: another job, config or global batch\n", rank,
                   path.c_str());
      return std::nullopt;
    }
    return st;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hpctrain: rank %d: WARNING: skipping snapshot %s: %s\n", rank, path.c_str(), e.what());
    return std::nullopt;
  }
}

void snapshot_broadcast_state(CheckpointState& st, int root, MPI_Comm comm) {
  int me = 0;
  MPI_Comm_rank(comm, &me);
  std::string header;
  if (me == root) {
    nlohmann::json h = {{"meta", st.meta}, {"tensors", nlohmann::json::array()}};
    for (auto& [name, t] : st.tensors)
      h["tensors"].push_back(
          {{"name", name}, {"dtype", static_cast<int>(t.scalar_type())}, {"shape", t.sizes().vec()}});
    header = h.dump();
  }
  int64_t n = static_cast<int64_t>(header.size());
  HPC_MPI_CHECK(MPI_Bcast(&n, 1, MPI_INT64_T, root, comm));
  header.resize(static_cast<size_t>(n));
  HPC_MPI_CHECK(MPI_Bcast(header.data(), static_cast<int>(n), MPI_CHAR, root, comm));
  if (me != root) {
    const nlohmann::json h = nlohmann::json::parse(header);
    st.meta = h["meta"];
    st.tensors.clear();
    for (const auto& e : h["tensors"])
      st.tensors.emplace_back(e["name"].get<std::string>(),
                              at::empty(e["shape"].get<std::vector<int64_t>>(),
                                        at::TensorOptions().dtype(static_cast<at::ScalarType>(e["dtype"].get<int>()))));
  }
  for (auto& [name, t] : st.tensors) {
    if (me == root) t = t.contiguous();
    auto* p = static_cast<char*>(t.data_ptr());
    for (int64_t off = 0, total = static_cast<int64_t>(t.nbytes()); off < total;) {
      const int piece = static_cast<int>(std::min<int64_t>(total - off, int64_t{1} << 30));
      HPC_MPI_CHECK(MPI_Bcast(p + off, piece, MPI_BYTE, root, comm));
      off += piece;
    }
  }
}

std::optional<SnapshotSession::Picked> SnapshotSession::pick(int64_t disk_step, c10::Device device) {
  if (!on_ || cfg_.resume != "auto") return std::nullopt;
  MPI_Comm world = world_.mpi_comm();
  // Snapshots of other jobs or configs beside this one: named, never used.
  if (world_.local_rank() == 0) {
    try {
      std::error_code ec;
      const std::string own = fs::path(dir_).filename().string();
      for (const auto& e : fs::directory_iterator(fs::path(dir_).parent_path(), ec)) {
        const std::string n = e.path().filename().string();
        if (n.rfind("hpctrain-", 0) == 0 && n != own && fs::is_directory(e.path() / snapshot_rank_dir_name(0), ec))
          std::fprintf(stderr, "hpctrain: note: host %s: not using %s: snapshots of another job or config\n",
                       world_.hostname().c_str(), e.path().string().c_str());
      }
    } catch (const std::exception&) {  // only a note
    }
  }
  std::optional<Picked> out = shards_ ? pick_shards(disk_step, device) : pick_whole(disk_step, device);
  // Every rank has read what it reads: only now may the old job's extra ranks' slots go, and
  // anything newer than where this run starts (an older run's step some rank never committed).
  HPC_MPI_CHECK(MPI_Barrier(world));
  remove_newer_than(out ? out->step : std::max<int64_t>(disk_step, -1));
  return out;
}

std::optional<SnapshotSession::Picked> SnapshotSession::pick_whole(int64_t disk_step, c10::Device device) {
  MPI_Comm world = world_.mpi_comm();
  Local mine = newest_on_host(dir_, job_, config_fp_, world_.size() * cfg_.batch_size, world_.rank());
  const int64_t key = mine.step < 0 ? -1 : (mine.step << kRankBits) | ((int64_t{1} << kRankBits) - 1 - mine.old_rank);
  int64_t best = -1;
  HPC_MPI_CHECK(MPI_Allreduce(&key, &best, 1, MPI_INT64_T, MPI_MAX, world));
  const int64_t step = best < 0 ? -1 : best >> kRankBits;
  const int old_rank =
      best < 0 ? -1 : static_cast<int>((int64_t{1} << kRankBits) - 1 - (best & ((int64_t{1} << kRankBits) - 1)));
  std::optional<Picked> out;
  if (step >= 0 && step > disk_step) {
    const int has = key == best ? 1 : 0;
    std::vector<int> holders(static_cast<size_t>(world_.size()));
    HPC_MPI_CHECK(MPI_Allgather(&has, 1, MPI_INT, holders.data(), 1, MPI_INT, world));
    int src = 0, received = 0;
    while (!holders[static_cast<size_t>(src)]) ++src;
    for (int h : holders) received += h ? 0 : 1;
    char host[256] = {};
    if (world_.rank() == src) std::snprintf(host, sizeof host, "%s", world_.hostname().c_str());
    HPC_MPI_CHECK(MPI_Bcast(host, sizeof host, MPI_CHAR, src, world));
    if (received > 0) {  // the ranks without a copy on their host, and the one that sends it
      const bool in = !has || world_.rank() == src;
      MPI_Comm sub = MPI_COMM_NULL;
      HPC_MPI_CHECK(MPI_Comm_split(world, in ? 0 : MPI_UNDEFINED, world_.rank() == src ? -1 : world_.rank(), &sub));
      if (in) {
        snapshot_broadcast_state(mine.state, 0, sub);
        MPI_Comm_free(&sub);
      }
    }
    Picked p;
    p.step = step;
    p.state = std::move(mine.state);
    if (!device.is_cpu())
      for (auto& [name, t] : p.state.tensors) t = t.to(device);
    p.source = "snapshot step " + std::to_string(step) + ": rank " + std::to_string(old_rank) + "'s snapshot on host " +
               host + " (" + std::to_string(world_.size() - received) + " rank(s) read it from their host's memory, " +
               std::to_string(received) + " received it over MPI; newest disk checkpoint: " +
               (disk_step < 0 ? std::string("none") : "step " + std::to_string(disk_step)) + ")";
    out = std::move(p);
  }
  return out;
}

void SnapshotSession::remove_newer_than(int64_t step) {
  if (world_.local_rank() != 0) return;
  static const std::regex rank_re("rank-([0-9]{5})"), copy_re("copy-of-rank-([0-9]{5})"), step_re("step-([0-9]+)");
  try {
    std::error_code ec;
    for (const auto& r : fs::directory_iterator(dir_, ec)) {
      const std::string n = r.path().filename().string();
      std::smatch m;
      std::error_code ec2;
      if (std::regex_match(n, m, rank_re) && std::stoi(m[1]) >= world_.size()) {
        fs::remove_all(r.path(), ec2);  // the old job's extra ranks' own slots
        continue;
      }
      if (!std::regex_match(n, m, rank_re) && !std::regex_match(n, m, copy_re)) continue;
      for (const auto& sd : fs::directory_iterator(r.path(), ec2)) {
        const std::string sn = sd.path().filename().string();
        std::smatch sm;
        if (std::regex_match(sn, sm, step_re) && std::stoll(sm[1]) > step) fs::remove_all(sd.path(), ec2);
      }
    }
  } catch (const std::exception&) {  // stale slots are only memory; the job dir goes at a clean finish
  }
}

}  // namespace hpctrain
