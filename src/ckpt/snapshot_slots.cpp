// SnapshotSlots (ckpt/snapshot_slots.h): one worker thread takes each snapshot's deferred copy,
// then plans, writes and commits it with the checkpoint writer's own steps (ckpt/store.h).
#include "ckpt/snapshot_slots.h"

#include <ATen/ATen.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "ckpt/dir_ops.h"
#include "ckpt/store.h"
#include "runtime/check.h"
#include "runtime/threads.h"

namespace hpctrain {

namespace fs = std::filesystem;

struct SnapshotSlots::Impl {
  std::string dir;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool stop = false, pending = false, taken = true, claimed = true, busy = false;
  int64_t step = 0, last_step = -1, bytes = 0;
  ckpt::NamedTensors source, host, spare;
  nlohmann::json meta;
  std::string error, copy_error;
  AfterCommit after_commit;
  int nice = 19;
  std::thread thread;

  // The deferred copy into host buffers, by whichever thread claims it first: the worker, or the
  // caller in before_update() (so a starved low-priority worker never holds up the next optimizer
  // step for longer than the memcpy). Called with `lock` held; returns with it held, `taken` set.
  void take_copy(std::unique_lock<std::mutex>& lock) {
    claimed = true;
    ckpt::NamedTensors src = std::move(source), reuse = std::move(spare);
    source.clear();
    spare.clear();
    lock.unlock();
    ckpt::NamedTensors out;
    std::string err;
    try {
      out = ckpt::snapshot_to_host(src, /*copy_cpu=*/true, &reuse);
    } catch (const std::exception& e) {
      err = e.what();
    }
    src.clear();  // the aliases of live tensors go before the caller may update them
    lock.lock();
    host = std::move(out);
    copy_error = std::move(err);
    taken = true;
    cv.notify_all();
  }

  void loop() {
    lower_this_thread_priority(nice);
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return stop || pending; });
      if (!pending) return;
      pending = false;
      const int64_t s = step;
      if (!taken && !claimed) take_copy(lock);
      cv.wait(lock, [&] { return taken; });  // the caller may have claimed it
      CheckpointState st;
      st.meta = meta;
      st.tensors = std::move(host);
      host.clear();
      std::string err = std::exchange(copy_error, std::string());
      lock.unlock();
      if (err.empty()) {
        try {
          ckpt::Manifest m = ckpt::plan_manifest(s, st, 1, int64_t{1} << 40);
          ckpt::prune(dir, 1);  // the previous snapshot stays until this one is begun
          ckpt::write_shards(ckpt::tmp_dir_for(dir, s), m, st.tensors, 0, 1, /*compress=*/false, /*sync=*/false);
          ckpt::commit(dir, m, /*keep=*/0, /*shards_synced=*/false);
        } catch (const std::exception& e) {
          err = e.what();
          std::error_code ec;
          fs::remove_all(ckpt::tmp_dir_for(dir, s), ec);
        }
      }
      if (err.empty() && after_commit) {
        try {
          after_commit(s, dir + "/" + ckpt::step_dir_name(s));
        } catch (const std::exception& e) {
          err = e.what();
        }
      }
      lock.lock();
      host.clear();
      spare = std::move(st.tensors);
      if (err.empty())
        last_step = s;
      else
        error = "snapshot step " + std::to_string(s) + " in " + dir + ": " + err;
      busy = false;
      cv.notify_all();
    }
  }
};

SnapshotSlots::SnapshotSlots(std::string dir, AfterCommit after_commit, int nice) : d_(std::make_unique<Impl>()) {
  d_->nice = nice;
  d_->dir = std::move(dir);
  d_->after_commit = std::move(after_commit);
  std::error_code ec;
  fs::create_directories(d_->dir, ec);
  if (ec) throw Error("cannot create snapshot directory " + d_->dir + ": " + ec.message());
  ckpt::remove_stale(d_->dir);
  d_->thread = std::thread([this] { d_->loop(); });
}

SnapshotSlots::~SnapshotSlots() {
  {
    std::lock_guard<std::mutex> lock(d_->mu);
    d_->stop = true;
  }
  d_->cv.notify_all();
  wait();
  if (d_->thread.joinable()) d_->thread.join();
}

bool SnapshotSlots::busy() const {
  std::lock_guard<std::mutex> lock(d_->mu);
  return d_->busy;
}

bool SnapshotSlots::start(int64_t step, CheckpointState st) {
  std::unique_lock<std::mutex> lock(d_->mu);
  if (d_->busy || d_->stop) return false;
  bool on_cpu = true;
  int64_t bytes = 0;
  for (const auto& [name, t] : st.tensors) {
    on_cpu = on_cpu && t.defined() && t.device().is_cpu();
    if (t.defined()) bytes += static_cast<int64_t>(t.nbytes());
  }
  if (on_cpu) {
    ckpt::check_snapshot(st.tensors);
    d_->source = std::move(st.tensors);
    d_->taken = d_->claimed = false;
  } else {
    d_->host = ckpt::snapshot_to_host(st.tensors, /*copy_cpu=*/true, &d_->spare);
  }
  d_->meta = std::move(st.meta);
  d_->step = step;
  d_->bytes = bytes;
  d_->busy = d_->pending = true;
  d_->cv.notify_all();
  return true;
}

void SnapshotSlots::before_update() {
  std::unique_lock<std::mutex> lock(d_->mu);
  if (!d_->taken && !d_->claimed) d_->take_copy(lock);
  d_->cv.wait(lock, [&] { return d_->taken; });
}

void SnapshotSlots::wait() {
  std::unique_lock<std::mutex> lock(d_->mu);
  d_->cv.wait(lock, [&] { return !d_->busy || !d_->thread.joinable(); });
}

std::string SnapshotSlots::take_error() {
  std::lock_guard<std::mutex> lock(d_->mu);
  return std::exchange(d_->error, std::string());
}

int64_t SnapshotSlots::last_step() const {
  std::lock_guard<std::mutex> lock(d_->mu);
  return d_->last_step;
}

int64_t SnapshotSlots::bytes() const {
  std::lock_guard<std::mutex> lock(d_->mu);
  return d_->bytes;
}

const std::string& SnapshotSlots::dir() const { return d_->dir; }

void commit_snapshot_files(const std::string& dir, int64_t step,
                           const std::vector<std::pair<std::string, std::string>>& files) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create snapshot directory " + dir + ": " + ec.message());
  ckpt::remove_stale(dir);
  ckpt::prune(dir, 1);
  const std::string tmp = ckpt::tmp_dir_for(dir, step);
  fs::create_directories(tmp, ec);
  if (ec) throw Error("cannot create " + tmp + ": " + ec.message());
  try {
    for (const auto& [name, bytes] : files) {
      if (name.empty() || name.find('/') != std::string::npos || name[0] == '.')
        throw Error("snapshot file name '" + name + "' is not a plain file name");
      ckpt::write_file(tmp + "/" + name, bytes, /*sync=*/false);
    }
    ckpt::rename_or_throw(tmp, dir + "/" + ckpt::step_dir_name(step));
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace hpctrain
