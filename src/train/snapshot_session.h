// SnapshotSession: --snapshot-every N, the training state copied into host memory at the step
// boundary (ckpt/snapshot_slots.h: two slots per rank in --snapshot-dir, written in the
// background), and --resume auto's choice among disk checkpoints and snapshots. Private to
// src/train (the trainer's set-up and loop call it).
//
// Layout: SNAPDIR/rank-RRRRR/step-NNNNNNNN/ (manifest.json + one HDF5 shard: the state a disk
// checkpoint of that step holds; meta "snapshot" = {job, config, rank, world_size, host}). The
// default SNAPDIR is /dev/shm/hpctrain-<16 hex digits of the job key and config fingerprint>.
// Each rank's snapshot is the whole training state (under DDP every rank holds it anyway;
// under ZeRO-1 the optimizer shards are gathered at the boundary, as for a disk checkpoint), so
// every host keeps every part and no copy is sent to another host.
//
// Contract:
// - Constructor (collective, on every rank): checks the directory (exit 2 naming it when
//   --snapshot-dir is not writable or not tmpfs/ramfs), and the room for two slots per local
//   rank: without it one warning line and snapshots stay off on every rank.
// - pick() (collective): the newest state every rank can load, one decision for all ranks.
// - save() at the step boundary (collective under ZeRO-1: the capture gathers), before_update()
//   before each optimizer step (local), finish() after a clean run (collective: removes them).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ckpt/checkpoint.h"
#include "train/config.h"
#include "train/train_state.h"

namespace hpctrain {

class Model;
class Reporter;
class SnapshotSlots;
class TrainOptimizer;
class World;

class SnapshotSession {
 public:
  SnapshotSession(const TrainConfig& cfg, World& world, Reporter& rep, int64_t state_bytes);
  ~SnapshotSession();
  bool on() const { return on_; }
  const std::string& dir() const { return dir_; }

  // Collective. With --resume auto: when a snapshot is newer than `disk_step` (-1: no disk
  // checkpoint), every rank gets that state (read from its host's memory, or sent over MPI from
  // a rank whose host holds it) and a line saying where it came from. nullopt: use the disk.
  struct Picked {
    CheckpointState state;
    std::string source;  // "snapshot step 41 (rank 0's, on host node0; ...)"
  };
  std::optional<Picked> pick(int64_t disk_step, c10::Device device);

  // Called on every rank after every step boundary; snapshots every --snapshot-every steps.
  void save(const TrainProgress& p, Model& model, TrainOptimizer& opt);
  void before_update();
  void finish();  // collective: waits, then removes this job's snapshots

 private:
  const TrainConfig& cfg_;
  World& world_;
  Reporter& rep_;
  bool on_ = false;
  std::string dir_, job_, config_fp_;
  std::unique_ptr<SnapshotSlots> slots_;
  int64_t skipped_ = 0;
  bool warned_ = false, broken_ = false;
};

// The job key and config fingerprint snapshots carry (16 hex digits each), and the default dir.
std::string snapshot_job_key(const TrainConfig& cfg);
std::string snapshot_config_fingerprint(const TrainConfig& cfg);

}  // namespace hpctrain
