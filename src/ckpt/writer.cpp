// CheckpointWriter: snapshot at the step boundary, write in a background thread, agree on
// errors through the communicator at every boundary. Why the commit of an all_writers
// checkpoint happens in check_errors on rank 0: only the trainer's thread may issue
// collectives (they must be ordered like every other collective), and the boundary allreduce is
// where rank 0 learns that every rank's shards are durable.
#include <ATen/ATen.h>
#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "ckpt/checkpoint.h"
#include "ckpt/checksum.h"
#include "ckpt/dir_ops.h"
#include "ckpt/store.h"
#include "comm/communicator.h"
#include "comm/small_collectives.h"
#include "runtime/check.h"
#include "runtime/clock.h"

namespace hpctrain {

struct CheckpointWriter::Job {
  ckpt::Manifest manifest;
  ckpt::NamedTensors host;
  // Snapshot::kBeforeUpdate: the caller's tensors (aliases), copied into `host` by the thread
  // (into `reuse`, the last snapshot's buffers, where they fit) before it writes.
  bool deferred = false;
  ckpt::NamedTensors source, reuse;
  std::mutex mu;
  std::condition_variable taken_cv;
  bool taken = true;               // under mu: `source` has been copied (or failed to)
  bool writes = false;             // this rank writes shards
  bool commits_in_thread = false;  // rank 0 without all_writers: commit right after its shards
  bool committed = false;          // all_writers: set on rank 0 by the main thread
  std::atomic<bool> done{false};
  std::string error;      // set by the thread before `done`
  CheckpointStats stats;  // write_s is set by the thread before `done`
};

namespace {

// Collective, once some rank's `errors` vote was non-zero: throws CollectiveError on every rank
// with every failing rank's message.
[[noreturn]] void raise_errors(Communicator& comm, const std::string& local_error, const std::string& context) {
  std::string msg = context + " failed:";
  std::vector<std::string> all = allgather_strings(comm, local_error, "ckpt.error_messages");
  for (size_t r = 0; r < all.size(); ++r)
    if (!all[r].empty()) msg += " rank " + std::to_string(r) + ": " + all[r] + ";";
  msg.pop_back();
  throw CollectiveError(msg);
}

// Collective: if any rank has a non-empty `local_error`, throws CollectiveError on every rank
// with every failing rank's message. `pending` is summed and returned otherwise.
int64_t agree_on(Communicator& comm, const std::string& local_error, int64_t pending, const std::string& context) {
  at::Tensor flags = at::tensor({local_error.empty() ? int64_t{0} : int64_t{1}, pending}, at::kLong);
  comm.allreduce(flags, ReduceOp::kSum, "ckpt.errors")->wait();
  if (flags[0].item<int64_t>() != 0) raise_errors(comm, local_error, context);
  return flags[1].item<int64_t>();
}

// Collective (all_writers, once every shard is durable): rank 0 learns each shard's size and
// whole-file checksum, and where each tensor's bytes lie, from the rank that wrote it. Each
// shard has one writer; the other ranks add zeros, so the sum is exact (offsets travel + 1).
void gather_shard_digests(Communicator& comm, ckpt::Manifest& m) {
  int64_t k = static_cast<int64_t>(m.shards.size()), nt = static_cast<int64_t>(m.tensors.size());
  at::Tensor t = at::zeros({2 * k + nt}, at::kLong);
  int64_t* p = t.data_ptr<int64_t>();
  auto mine = [&](int64_t s) { return s % comm.size() == comm.rank() && m.shards[s].bytes >= 0; };
  for (int64_t s = 0; s < k; ++s)
    if (mine(s)) {
      p[2 * s] = m.shards[s].bytes;
      p[2 * s + 1] = static_cast<int64_t>(std::stoull(m.shards[s].xxh3, nullptr, 16));
    }
  for (int64_t i = 0; i < nt; ++i)
    if (mine(m.tensors[i].shard)) p[2 * k + i] = m.tensors[i].offset + 1;
  comm.allreduce(t, ReduceOp::kSum, "ckpt.shard_digests")->wait();
  for (int64_t s = 0; s < k; ++s) {
    m.shards[s].bytes = p[2 * s];
    m.shards[s].xxh3 = ckpt::hex64(static_cast<uint64_t>(p[2 * s + 1]));
  }
  for (int64_t i = 0; i < nt; ++i) m.tensors[i].offset = p[2 * k + i] - 1;
}

// Collective (all_writers): every rank cuts the shard plan from its own tensor list, so the
// lists must agree (names, order, sizes); a rank whose list differs would write shards of
// another plan. One allreduce of (max, -min) of a hash of the plan; a mismatch throws on every rank.
void check_same_plan(Communicator& comm, const ckpt::Manifest& m, int64_t step) {
  std::string key;
  for (const auto& t : m.tensors)
    key += t.name + '\0' + std::to_string(t.nbytes) + '\0' + std::to_string(t.shard) + '\n';
  const auto h = static_cast<int64_t>(XXH3_64bits(key.data(), key.size()));
  at::Tensor t = at::tensor({h, h == INT64_MIN ? INT64_MAX : -h}, at::kLong);
  comm.allreduce(t, ReduceOp::kMax, "ckpt.plan")->wait();
  if (t[0].item<int64_t>() != h || t[1].item<int64_t>() != (h == INT64_MIN ? INT64_MAX : -h))
    throw CollectiveError("checkpoint " + ckpt::step_dir_name(step) +
                          ": the ranks' states differ (tensor names, order or sizes), so --ckpt-writers all "
                          "would write shards of different plans; pass the same state on every rank");
}

}  // namespace

CheckpointWriter::CheckpointWriter(CheckpointOptions opts, Communicator& comm) : opts_(std::move(opts)), comm_(comm) {
  std::string err;
  if (opts_.dir.empty()) throw CollectiveError("checkpoint: no directory given (--ckpt-dir)");
  if (comm_.rank() == 0) {
    try {
      std::filesystem::create_directories(opts_.dir);
      int n = ckpt::remove_stale(opts_.dir);
      if (n > 0)
        std::fprintf(stderr, "hpctrain: removed %d stale temporary checkpoint entr%s in %s\n", n, n == 1 ? "y" : "ies",
                     opts_.dir.c_str());
    } catch (const std::exception& e) {
      err = std::string("cannot prepare ") + opts_.dir + ": " + e.what();
    }
  }
  agree_on(comm_, err, 0, "checkpoint set-up");  // also a barrier: nobody writes before cleanup
}

CheckpointWriter::~CheckpointWriter() {
  wait_local();
  if (job_ && !job_->error.empty())
    std::fprintf(stderr, "hpctrain: checkpoint step-%08lld: unreported error: %s\n",
                 static_cast<long long>(job_->manifest.step), job_->error.c_str());
}

void CheckpointWriter::wait_local() {
  if (thread_.joinable()) thread_.join();
}

void CheckpointWriter::run_job(Job& job) {
  if (job.deferred) {
    try {
      job.host = ckpt::snapshot_to_host(job.source, /*copy_cpu=*/true, &job.reuse);
    } catch (const std::exception& e) {
      job.error = e.what();
    }
    job.source.clear();  // no alias of a live tensor stays behind
    {
      std::lock_guard<std::mutex> lock(job.mu);
      job.taken = true;
    }
    job.taken_cv.notify_all();
  }
  auto t0 = std::chrono::steady_clock::now();
  try {
    if (!job.error.empty()) throw Error(job.error);
    int rank = comm_.rank(), n = comm_.size();
    std::string tmp = ckpt::tmp_dir_for(opts_.dir, job.manifest.step);
    // all_writers: each rank's shards must be durable before it reports done (rank 0 commits
    // when every rank is); otherwise rank 0's commit fsyncs them with the manifest.
    ckpt::write_shards(tmp, job.manifest, job.host, opts_.all_writers ? rank : 0, opts_.all_writers ? n : 1,
                       opts_.compress, /*sync=*/opts_.all_writers);
    if (rank == 0) ckpt::fill_missing_checksums(job.manifest, job.host);
    if (!opts_.async) job.host.clear();  // sync: aliases of live tensors, nothing to recycle
    if (job.commits_in_thread) ckpt::commit(opts_.dir, job.manifest, opts_.keep, /*shards_synced=*/false);
  } catch (const std::exception& e) {
    job.error = e.what();
  }
  job.stats.write_s = seconds_since(t0);
  job.done.store(true, std::memory_order_release);
}

CheckpointWriter::Vote CheckpointWriter::local_vote() {
  Vote v;
  bool done = job_ && job_->done.load(std::memory_order_acquire);  // read once: err and
  v.error = done ? job_->error : "";                               // pending must agree
  v.pending = job_ && job_->writes && !done ? 1 : 0;
  v.context = job_ ? "checkpoint " + ckpt::step_dir_name(job_->manifest.step) : "checkpoint";
  return v;
}

bool CheckpointWriter::settle(const Vote& mine, int64_t errors, int64_t all_pending, bool wait_all,
                              bool* agreed_clean) {
  if (errors != 0) {
    try {
      raise_errors(comm_, mine.error, mine.context);
    } catch (...) {
      wait_local();
      job_.reset();  // reported: don't raise it twice
      throw;
    }
  }
  *agreed_clean = all_pending == 0;
  bool need_commit = job_ && opts_.all_writers && !job_->committed;
  if (need_commit && all_pending == 0) {
    // Every rank's shards are fsynced: rank 0 publishes the checkpoint.
    gather_shard_digests(comm_, job_->manifest);
    if (comm_.rank() == 0) {
      auto t0 = std::chrono::steady_clock::now();
      try {
        ckpt::commit(opts_.dir, job_->manifest, opts_.keep, /*shards_synced=*/true);
        job_->stats.write_s += seconds_since(t0);  // the commit is part of the write
      } catch (const std::exception& e) {
        job_->error = e.what();
      }
    }
    job_->committed = true;
    *agreed_clean = false;      // the commit's outcome is not agreed yet
    if (wait_all) return true;  // agree on it now (otherwise at the next boundary)
  }
  return wait_all && all_pending != 0;
}

void CheckpointWriter::agree(bool wait_all) {
  // Set when the last agreement saw every write done and nothing unagreed happened since. The
  // job is retired on that agreed state only, so every rank holds a job over the same steps and
  // check_errors can skip its collective when none is in flight.
  bool agreed_clean = false;
  for (bool again = true; again;) {
    if (wait_all) wait_local();
    Vote v = local_vote();
    at::Tensor flags = at::tensor({v.error.empty() ? int64_t{0} : int64_t{1}, v.pending}, at::kLong);
    comm_.allreduce(flags, ReduceOp::kSum, "ckpt.errors")->wait();
    again = settle(v, flags[0].item<int64_t>(), flags[1].item<int64_t>(), wait_all, &agreed_clean);
  }
  finish_agreement(agreed_clean);
}

void CheckpointWriter::finish_agreement(bool agreed_clean) {
  if (job_ && agreed_clean && (!opts_.all_writers || job_->committed)) retire_job();
}

CheckpointWriter::BoundaryVote CheckpointWriter::boundary_vote() {
  boundary_vote_ = local_vote();
  return {boundary_vote_.error.empty() ? 0 : 1, boundary_vote_.pending};
}

void CheckpointWriter::settle_boundary(int64_t errors, int64_t pending) {
  if (!job_) return;  // job_ is held over the same steps on every rank (see agree)
  bool agreed_clean = false;
  settle(boundary_vote_, errors, pending, /*wait_all=*/false, &agreed_clean);
  finish_agreement(agreed_clean);
}

void CheckpointWriter::retire_job() {
  wait_local();
  completed_.push_back(job_->stats);
  spare_ = std::move(job_->host.empty() ? job_->reuse : job_->host);  // the next snapshot copies
                                                                      // into these (no fresh pages)
  job_.reset();
}

std::vector<CheckpointStats> CheckpointWriter::take_completed() {
  std::vector<CheckpointStats> out;
  out.swap(completed_);
  return out;
}

double CheckpointWriter::before_update() {
  if (!job_ || !job_->deferred) return 0;
  std::unique_lock<std::mutex> lock(job_->mu);
  if (job_->taken) return 0;
  auto t0 = std::chrono::steady_clock::now();
  job_->taken_cv.wait(lock, [this] { return job_->taken; });
  double waited = seconds_since(t0);
  job_->stats.stall_s += waited;  // the thread never touches stall_s
  return waited;
}

void CheckpointWriter::save(int64_t step, CheckpointState state, Snapshot when) {
  auto t0 = std::chrono::steady_clock::now();
  // At most one write in flight; its errors surface here on every rank. job_ is held over the
  // same steps on every rank (see agree), so with none in flight no rank needs the collective.
  if (job_) agree(true);
  // Name and dtype checks run on every rank so that a bad state fails identically everywhere.
  std::string err;
  ckpt::Manifest manifest;
  try {
    manifest = ckpt::plan_manifest(step, state, comm_.size(), opts_.shard_mb);
  } catch (const std::exception& e) {
    err = e.what();
  }
  int rank = comm_.rank();
  auto job = std::make_unique<Job>();
  job->manifest = std::move(manifest);
  job->writes = opts_.all_writers || rank == 0;
  job->commits_in_thread = !opts_.all_writers && rank == 0;
  job->stats.step = step;
  job->stats.async = opts_.async;
  for (const auto& e : job->manifest.tensors) job->stats.bytes += e.nbytes;
  bool defer = when == Snapshot::kBeforeUpdate && opts_.async;
  for (const auto& nt : state.tensors) defer = defer && nt.second.defined() && nt.second.device().is_cpu();
  if (err.empty() && job->writes) {
    try {
      if (defer) {  // the thread copies (run_job); before_update() waits for it
        ckpt::check_snapshot(state.tensors);
        job->deferred = true;
        job->taken = false;
        job->source = std::move(state.tensors);
        job->reuse = std::move(spare_);
        spare_.clear();
      } else {
        // A synchronous save returns only after the write, so nothing mutates CPU tensors
        // meanwhile: no copy then (it would only add to the stall).
        job->host = ckpt::snapshot_to_host(state.tensors, /*copy_cpu=*/opts_.async, &spare_);
      }
    } catch (const std::exception& e) {
      err = e.what();
    }
  }
  agree_on(comm_, err, 0, "checkpoint " + ckpt::step_dir_name(step) + " snapshot");
  if (opts_.all_writers) check_same_plan(comm_, job->manifest, step);
  job_ = std::move(job);
  // The stall is known before the thread can finish (async) and before it is retired (sync):
  // set it now, and for a sync save add the wait below to the record it retires into.
  job_->stats.stall_s = seconds_since(t0);
  if (job_->writes) {
    thread_ = std::thread([this, j = job_.get()] { run_job(*j); });
  } else {
    job_->done = true;
  }
  if (!opts_.async) {
    agree(true);
    if (!completed_.empty() && completed_.back().step == step) completed_.back().stall_s = seconds_since(t0);
  }
}

void CheckpointWriter::check_errors() {
  if (job_) agree(false);  // job_ is held over the same steps on every rank (see agree)
}

void CheckpointWriter::finish() { agree(true); }

}  // namespace hpctrain
