// SnapshotSession::pick_shards (train/snapshot_session.h): resume from ZeRO-1/2/3 snapshots,
// each holding one rank's optimizer shard (and under --zero 3 its parameter blocks). Every rank verifies its share of its host's snapshot
// directories (its own ranks' and the copies of other hosts' ranks), the lists of (saving rank,
// step, saving world size) are allgathered, every rank picks the same step S (the newest, newer
// than the disk checkpoint, for which every saving rank 0..W-1 has a holder), and each shard is
// broadcast from its lowest holder: rank 0's snapshot whole (model, progress, its shard, the
// partition), the others' shards alone. Stage 3's parameter blocks are joined into per-parameter
// model/ tensors (ckpt/zero_state.h, the same joiner as the optimizer state's). The result is
// the gathered layout a disk checkpoint of step S holds, which the restore path reshards for
// this run.
#include <mpi.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <regex>

#include "ckpt/zero_state.h"
#include "runtime/check.h"
#include "runtime/world.h"
#include "train/snapshot_copy.h"
#include "train/snapshot_layout.h"
#include "train/snapshot_session.h"

namespace hpctrain {

namespace fs = std::filesystem;

namespace {

// One shard a rank holds: [saving rank, step, saving world size, 1 if a copy (else own memory)].
using Entry = std::array<int64_t, 4>;

struct Held {
  std::map<std::pair<int64_t, int64_t>, CheckpointState> states;  // (saving rank, step) -> state
  std::vector<Entry> entries;
};

// This rank's share of the host's snapshot directories (directory i of the sorted list goes to
// local rank i mod local size, so each is read once per host), each snapshot verified.
Held scan_shards(const std::string& dir, const std::string& job, const std::string& config, int64_t global_batch,
                 const World& w) {
  static const std::regex dir_re("(rank|copy-of-rank)-([0-9]{5})"), step_re("step-([0-9]+)");
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory(ec) && std::regex_match(n, dir_re)) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  Held h;
  for (size_t i = 0; i < dirs.size(); ++i) {
    if (static_cast<int>(i % static_cast<size_t>(w.local_size())) != w.local_rank()) continue;
    std::smatch m;
    const std::string n = dirs[i].filename().string();
    std::regex_match(n, m, dir_re);
    const int64_t old_rank = std::stoll(m[2]), copy = m[1] == "rank" ? 0 : 1;
    std::error_code ec2;
    for (const auto& s : fs::directory_iterator(dirs[i], ec2)) {
      std::smatch sm;
      const std::string sn = s.path().filename().string();
      if (!s.is_directory(ec2) || !std::regex_match(sn, sm, step_re) || !fs::exists(s.path() / "manifest.json", ec2))
        continue;
      const int64_t step = std::stoll(sm[1]);
      if (h.states.count({old_rank, step})) continue;  // the same shard twice on one host (own and copy)
      std::optional<CheckpointState> st = read_snapshot_checked(s.path().string(), job, config, global_batch, w.rank());
      if (!st) continue;
      const nlohmann::json meta = st->meta.value("snapshot", nlohmann::json::object());
      if (!meta.value("sharded", false) || meta.value("rank", -1) != old_rank) continue;
      h.entries.push_back({old_rank, step, meta.value("world_size", int64_t{0}), copy});
      h.states.emplace(std::make_pair(old_rank, step), std::move(*st));
    }
  }
  return h;
}

std::vector<Entry> allgather_entries(const std::vector<Entry>& mine, std::vector<int>& owner, MPI_Comm comm) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  const int n = static_cast<int>(mine.size() * 4);
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  HPC_MPI_CHECK(MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, comm));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    displs[static_cast<size_t>(r)] = total;
    total += counts[static_cast<size_t>(r)];
  }
  std::vector<int64_t> flat(static_cast<size_t>(total));
  std::vector<int64_t> send;
  for (const Entry& e : mine) send.insert(send.end(), e.begin(), e.end());
  HPC_MPI_CHECK(
      MPI_Allgatherv(send.data(), n, MPI_INT64_T, flat.data(), counts.data(), displs.data(), MPI_INT64_T, comm));
  std::vector<Entry> all;
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < counts[static_cast<size_t>(r)]; i += 4) {
      const size_t at = static_cast<size_t>(displs[static_cast<size_t>(r)] + i);
      all.push_back({flat[at], flat[at + 1], flat[at + 2], flat[at + 3]});
      owner.push_back(r);
    }
  return all;
}

}  // namespace

std::optional<SnapshotSession::Picked> SnapshotSession::pick_shards(int64_t disk_step, c10::Device device) {
  MPI_Comm world = world_.mpi_comm();
  Held held = scan_shards(dir_, job_, config_fp_, world_.size() * cfg_.batch_size, world_);
  std::vector<int> owner;
  const std::vector<Entry> all = allgather_entries(held.entries, owner, world);
  const std::vector<std::string> hosts = snapshot_host_names(world_);
  // The same choice on every rank from the same list: newest step first.
  std::vector<int64_t> steps;
  for (const Entry& e : all) steps.push_back(e[1]);
  std::sort(steps.rbegin(), steps.rend());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  int64_t step = -1, saved_world = 0;
  std::vector<size_t> holder;  // per saving rank: its entry in `all` (lowest holding rank)
  for (int64_t s : steps) {
    if (s <= disk_step) break;
    int64_t w = 0;
    for (const Entry& e : all)
      if (e[1] == s) w = std::max(w, e[2]);
    std::vector<size_t> pick(static_cast<size_t>(w), all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      const Entry& e = all[i];
      if (e[1] != s || e[2] != w || e[0] < 0 || e[0] >= w) continue;
      size_t& p = pick[static_cast<size_t>(e[0])];
      if (p == all.size() || owner[i] < owner[p]) p = i;
    }
    if (w > 0 && std::none_of(pick.begin(), pick.end(), [&](size_t p) { return p == all.size(); })) {
      step = s;
      saved_world = w;
      holder = std::move(pick);
      break;
    }
  }
  if (step < 0) return std::nullopt;
  Picked p;
  p.step = step;
  std::string parts;
  for (int64_t k = 0; k < saved_world; ++k) {
    const size_t i = holder[static_cast<size_t>(k)];
    const int root = owner[i];
    CheckpointState st;
    if (world_.rank() == root) {
      st = std::move(held.states.at({k, step}));
      if (k > 0) {  // the replicated model and progress come from rank 0's snapshot: only the shard travels
        std::vector<std::pair<std::string, at::Tensor>> shard;
        for (auto& [name, t] : st.tensors)
          if (is_rank_shard_tensor(name, static_cast<int>(k))) shard.emplace_back(name, t);
        st.tensors = std::move(shard);
      }
    }
    snapshot_broadcast_state(st, root, world);
    if (k == 0)
      p.state = std::move(st);
    else
      for (auto& named : st.tensors) p.state.tensors.push_back(std::move(named));
    parts += std::string(k > 0 ? ", " : "") + "rank " + std::to_string(k) + "'s shard from host " +
             hosts[static_cast<size_t>(root)] + (all[i][3] ? "'s copy" : "'s memory");
  }
  // --zero 3: whole per-parameter tensors from every rank's parameter blocks (the same state on
  // every rank, so the same verdict: a record that disagrees is the same error everywhere).
  unshard_parameters(p.state, "snapshot step " + std::to_string(step));
  if (!device.is_cpu())
    for (auto& [name, t] : p.state.tensors) t = t.to(device);
  p.source = "snapshot step " + std::to_string(step) + ": " + parts + " (" + std::to_string(saved_world) +
             " shard(s) of a " + std::to_string(saved_world) + "-rank run; newest disk checkpoint: " +
             (disk_step < 0 ? std::string("none") : "step " + std::to_string(disk_step)) + ")";
  return p;
}

}  // namespace hpctrain
