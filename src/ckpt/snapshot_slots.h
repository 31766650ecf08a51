// SnapshotSlots: one rank's training-state snapshots in a directory in memory (--snapshot-dir,
// tmpfs), in the checkpoint format (a step-NNNNNNNN directory: manifest.json with the xxh3 of
// every tensor and file, one HDF5 shard), so read_checkpoint verifies and reads them as it does
// disk checkpoints.
//
// Contract:
// - Local: no collective, no communicator. One background thread per object, at nice value
//   `nice` (runtime/threads.h; 19: it uses idle CPU time only).
// - Two slots: DIR/step-N (the newest complete snapshot) and DIR/step-M.tmp (the one being
//   written). Right before step-M.tmp is created, every complete snapshot but the newest is
//   removed; the commit renames step-M.tmp to step-M and keeps step-N. So a process killed at
//   any moment leaves at least one whole snapshot, the directory never holds more than two, and
//   a rank keeps its previous snapshot until it starts the next one (ranks that start their
//   snapshots together, train/snapshot_session.h, so always share one complete step).
// - after_commit (optional): called on the thread after each commit with the step and its
//   directory (the ring copy to another host, train/snapshot_copy.h); the write counts as in
//   flight (busy) until it returns; what it throws becomes take_error()'s message.
// - start(): with every tensor on the CPU, the copy into host buffers (the previous snapshot's,
//   recycled) runs on the thread, or in before_update() on the caller when the thread has not
//   begun it by then (a low-priority thread must not hold up the optimizer step for more than
//   the memcpy): the caller must not mutate any tensor it passed until before_update() has
//   returned (the trainer calls it right before the next optimizer step,
//   and passes copies of what changes sooner). A tensor on a GPU makes start() copy at once.
//   While a write is in flight start() writes nothing and returns false (the step is skipped).
// - A failed write is kept as take_error()'s message; the previous snapshot stays whole.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/checkpoint.h"

namespace hpctrain {

class SnapshotSlots {
 public:
  // Creates `dir` (and its parents) and removes what a killed writer left there (*.tmp).
  using AfterCommit = std::function<void(int64_t step, const std::string& step_dir)>;
  explicit SnapshotSlots(std::string dir, AfterCommit after_commit = nullptr, int nice = 19);
  ~SnapshotSlots();  // waits for the write in flight
  SnapshotSlots(const SnapshotSlots&) = delete;
  SnapshotSlots& operator=(const SnapshotSlots&) = delete;

  bool busy() const;
  bool start(int64_t step, CheckpointState st);
  void before_update();
  void wait();  // until no write is in flight
  std::string take_error();
  int64_t last_step() const;  // the newest snapshot this object committed (-1: none yet)
  int64_t bytes() const;      // the payload of the last snapshot started
  const std::string& dir() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> d_;
};

// A snapshot's files (name -> bytes: manifest.json and its shard, as read from another host's
// step directory) committed as DIR/step-N with the same slot discipline: every complete
// snapshot but the newest removed, written as step-N.tmp, renamed. Creates DIR. Throws
// hpctrain::Error naming the path.
void commit_snapshot_files(const std::string& dir, int64_t step,
                           const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace hpctrain
