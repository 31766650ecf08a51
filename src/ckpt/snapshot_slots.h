// SnapshotSlots: one rank's training-state snapshots in a directory in memory (--snapshot-dir,
// tmpfs), in the checkpoint format (a step-NNNNNNNN directory: manifest.json with the xxh3 of
// every tensor and file, one HDF5 shard), so read_checkpoint verifies and reads them as it does
// disk checkpoints.
//
// Contract:
// - Local: no collective, no communicator. One background thread per object.
// - Two slots: DIR/step-N (the newest complete snapshot) and DIR/step-M.tmp (the one being
//   written). The commit renames step-M.tmp to step-M, then removes step-N (ckpt/store.h commit
//   with keep 1), so a process killed at any moment leaves at least one whole snapshot, and the
//   directory never holds more than two.
// - start(): with every tensor on the CPU, the copy into host buffers (the previous snapshot's,
//   recycled) runs on the thread: the caller must not mutate any tensor it passed until
//   before_update() has returned (the trainer calls it right before the next optimizer step,
//   and passes copies of what changes sooner). A tensor on a GPU makes start() copy at once.
//   While a write is in flight start() writes nothing and returns false (the step is skipped).
// - A failed write is kept as take_error()'s message; the previous snapshot stays whole.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ckpt/checkpoint.h"

namespace hpctrain {

class SnapshotSlots {
 public:
  // Creates `dir` (and its parents) and removes what a killed writer left there (*.tmp).
  explicit SnapshotSlots(std::string dir);
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

}  // namespace hpctrain
