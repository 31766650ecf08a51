// SnapshotSession's set-up, boundary and clean-up (the resume side: snapshot_resume.cpp).
#include "train/snapshot_session.h"

#include <mpi.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "ckpt/snapshot_slots.h"
#include "metrics/progress.h"
#include "optim/train_optimizer.h"
#include "runtime/agree.h"
#include "runtime/check.h"
#include "runtime/world.h"
#include "train/snapshot_copy.h"
#include "train/snapshot_layout.h"

namespace hpctrain {

namespace fs = std::filesystem;

namespace {

constexpr long kTmpfsMagic = 0x01021994, kRamfsMagic = 0x858458f6;

std::string fnv16(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// Why `dir` cannot hold snapshots ("" if it can): not in memory (judged on its nearest existing
// ancestor, before anything is created), not creatable, or not writable.
std::string unusable(const std::string& dir) {
  std::error_code ec;
  fs::path probe = fs::absolute(dir, ec);
  while (!probe.empty() && !fs::exists(probe, ec) && probe != probe.parent_path()) probe = probe.parent_path();
  struct statfs sf {};
  if (statfs(probe.c_str(), &sf) != 0) return "cannot be examined (statfs failed)";
  if (static_cast<long>(sf.f_type) != kTmpfsMagic && static_cast<long>(sf.f_type) != kRamfsMagic)
    return "is not in memory (not tmpfs or ramfs): a snapshot on a shared or disk filesystem is a slow disk "
           "checkpoint; use --ckpt-every for that, or a directory in /dev/shm";
  fs::create_directories(dir, ec);
  if (ec) return "cannot be created (" + ec.message() + ")";
  if (access(dir.c_str(), W_OK | X_OK) != 0) return "is not writable";
  return "";
}

int64_t free_bytes(const std::string& dir) {
  struct statvfs sv {};
  if (statvfs(dir.c_str(), &sv) != 0) return 0;
  return static_cast<int64_t>(sv.f_bavail) * static_cast<int64_t>(sv.f_frsize);
}

// The bytes under `dir` (a restarted job's own earlier snapshots: its new ones replace them).
int64_t tree_bytes(const std::string& dir) {
  int64_t n = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) n += static_cast<int64_t>(it->file_size(ec));
  return n;
}

std::string mib(int64_t b) { return std::to_string((b + (1 << 20) - 1) >> 20) + " MiB"; }

}  // namespace

std::string snapshot_job_key(const TrainConfig& cfg) {
  std::string key;
  if (const char* j = std::getenv("SLURM_JOB_ID"); j && *j) key += std::string("slurm:") + j;
  std::error_code ec;
  if (!cfg.ckpt_dir.empty()) key += "|ckpt:" + fs::absolute(cfg.ckpt_dir, ec).lexically_normal().string();
  if (cfg.ckpt_dir.empty()) key += "|cwd:" + fs::current_path(ec).string();
  return fnv16(key);
}

std::string snapshot_config_fingerprint(const TrainConfig& cfg) {
  nlohmann::json j = cfg.to_json();
  // What a restart may change without changing the training: where it reports and resumes, and
  // the per-rank batch (a launcher that shrinks the job keeps the global batch: the snapshot
  // carries that, checked when it is picked).
  for (const char* k :
       {"resume", "batch_size", "snapshot_dir", "metrics", "tensorboard", "trace", "log_every", "collective_timeout",
        "flight_records", "debug_collectives", "straggler_threshold", "snapshot_nice"})
    j.erase(k);
  return fnv16(j.dump());
}

SnapshotSession::SnapshotSession(const TrainConfig& cfg, World& world, Reporter& rep, int64_t state_bytes, bool shards)
    : cfg_(cfg), world_(world), rep_(rep), shards_(shards) {
  if (cfg.snapshot_every <= 0) return;
  job_ = snapshot_job_key(cfg);
  config_fp_ = snapshot_config_fingerprint(cfg);
  const bool given = !cfg.snapshot_dir.empty();
  const std::string root = given ? cfg.snapshot_dir : std::string("/dev/shm");
  dir_ = (fs::path(root) / snapshot_job_dir_name(job_, config_fp_)).string();
  std::string why_off;
  agree_on_failure(world.mpi_comm(), [&] {
    std::string why = unusable(root);
    if (!why.empty() && given) throw InputError("--snapshot-dir " + root + " on host " + world.hostname() + " " + why);
    why_off = why.empty() ? "" : root + " on host " + world.hostname() + " " + why;
  });
  // Room for two slots per rank of this host (the one in use and the one being written), and two
  // per copy it receives from the previous host (ZeRO with more than one host).
  const std::vector<std::string> hosts = snapshot_host_names(world);
  const std::vector<int> partners = shards ? snapshot_ring_partners(hosts) : std::vector<int>(hosts.size(), -1);
  int copies_here = 0;
  for (int p : partners) copies_here += p >= 0 && hosts[static_cast<size_t>(p)] == world.hostname() ? 1 : 0;
  const int64_t slots = 2 * (int64_t{world.local_size()} + copies_here);
  const int64_t need = slots * (state_bytes + (1 << 20));
  const int64_t room = why_off.empty() ? free_bytes(root) + tree_bytes(dir_) : 0;
  int ok = why_off.empty() && room >= need ? 1 : 0, all_ok = 0;
  if (ok == 0 && why_off.empty())
    why_off = root + " on host " + world.hostname() + " has " + mib(room) + " free, less than the " + mib(need) +
              " two slots of " + std::to_string(world.local_size()) + " rank(s) and " + std::to_string(copies_here) +
              " copies need";
  HPC_MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, world.mpi_comm()));
  // The first failing rank's reason, for the one line rank 0 prints.
  int first = ok ? world.size() : world.rank(), first_all = 0;
  HPC_MPI_CHECK(MPI_Allreduce(&first, &first_all, 1, MPI_INT, MPI_MIN, world.mpi_comm()));
  if (!all_ok) {
    char why[512] = {};
    if (world.rank() == first_all) std::snprintf(why, sizeof why, "%s", why_off.c_str());
    HPC_MPI_CHECK(MPI_Bcast(why, sizeof why, MPI_CHAR, first_all, world.mpi_comm()));
    rep.message(std::string("hpctrain train: WARNING: snapshots off (--snapshot-every ") +
                std::to_string(cfg.snapshot_every) + "): " + why + "; training goes on with disk checkpoints only");
    return;
  }
  on_ = true;
  const int me = world.rank(), partner = partners[static_cast<size_t>(me)];
  std::string what;
  const std::string own =
      cfg.zero == 3 ? "its own ZeRO-3 shard (parameter blocks and optimizer state)" : "its own ZeRO shard";
  if (!shards)
    what = "every rank keeps the whole state, so no copy goes to another host";
  else if (partner < 0)
    what = "each rank keeps " + own + "; one host, so no copy goes to another host (a lost host loses them)";
  else
    what = "each rank keeps " + own + " and sends a copy to the next host in a ring (rank " +
           std::to_string(me) + " -> rank " + std::to_string(partner) + " on host " +
           hosts[static_cast<size_t>(partner)] + "), on background threads at nice " +
           std::to_string(cfg.snapshot_nice) +
           " and a communicator of their own (they never hold up "
           "a gradient collective; with fewer cores than busy threads they still share the CPU, and a snapshot due "
           "while one is written or copied is skipped by every rank)";
  rep.message("hpctrain train: snapshots every " + std::to_string(cfg.snapshot_every) + " step(s) in " + dir_ + ": " +
              mib(slots * state_bytes) + " per host (2 slots x (" + std::to_string(world.local_size()) + " rank(s) + " +
              std::to_string(copies_here) + " copies) x " + mib(state_bytes) + " of state; " + what + ")");
  if (partner >= 0) copies_ = std::make_unique<SnapshotCopies>(world, hosts, dir_, static_cast<int>(cfg.snapshot_nice));
}

SnapshotSession::~SnapshotSession() {
  if (copies_) copies_->abandon();  // a writer waiting on a copy must not hold up the slots' destructor
  slots_.reset();
  copies_.reset();
}

int64_t SnapshotSession::busy_vote() const { return slots_ && slots_->busy() ? 1 : 0; }

void SnapshotSession::before_update() {
  if (slots_) slots_->before_update();
}

void SnapshotSession::save(const TrainProgress& p, Model& model, TrainOptimizer& opt) {
  if (!on_ || p.step % cfg_.snapshot_every != 0) return;
  std::string err;
  if (!slots_ && !broken_) {
    try {
      SnapshotSlots::AfterCommit copy;
      if (copies_) copy = [c = copies_.get()](int64_t step, const std::string& step_dir) { c->send(step, step_dir); };
      slots_ = std::make_unique<SnapshotSlots>((fs::path(dir_) / snapshot_rank_dir_name(world_.rank())).string(),
                                               std::move(copy), static_cast<int>(cfg_.snapshot_nice));
    } catch (const std::exception& e) {
      broken_ = true;  // this rank takes no snapshot; the others go on (resume takes what any rank has)
      err = e.what();
    }
  }
  if (slots_) err = slots_->take_error();
  if (err.empty() && copies_) err = copies_->take_error();
  if (!err.empty() && !warned_) {
    warned_ = true;  // once: the next snapshots may well succeed (the previous slot stays whole)
    std::fprintf(stderr, "hpctrain: rank %d: WARNING: %s\n", world_.rank(), err.c_str());
  }
  nlohmann::json meta = {{"snapshot",
                          {{"job", job_},
                           {"config", config_fp_},
                           {"rank", world_.rank()},
                           {"world_size", world_.size()},
                           {"global_batch", world_.size() * cfg_.batch_size},
                           {"host", world_.hostname()},
                           {"sharded", shards_}}}};
  if (skip_next_) {  // some rank's write or copy still runs (the boundary's vote): every rank skips
    ++skipped_;
    return;
  }
  CheckpointState st = capture_model_state(model, p, meta, /*copy_buffers=*/true);
  if (shards_)
    opt.capture_own_shard(st);  // local: this rank's shard only (--zero 3: its parameter blocks too)
  else
    opt.capture(st);  // DDP: local
  if (slots_ && slots_->start(p.step, std::move(st)))
    ++taken_;
  else
    ++skipped_;
}

void SnapshotSession::finish() {
  if (!on_) return;
  slots_.reset();  // waits for the write (and its copy) in flight
  if (copies_) copies_->finish(/*timeout_s=*/60);
  rep_.message("hpctrain train: snapshots: " + std::to_string(taken_) + " taken, " + std::to_string(skipped_) +
               " skipped (a write or copy still in flight)");
  std::error_code ec;
  fs::remove_all(fs::path(dir_) / snapshot_rank_dir_name(world_.rank()), ec);
  HPC_MPI_CHECK(MPI_Barrier(world_.mpi_comm()));
  if (world_.local_rank() == 0) fs::remove_all(dir_, ec);  // ranks of a larger earlier run too
}

}  // namespace hpctrain
