// SnapshotSession: --snapshot-every N, the training state copied into host memory at the step
// boundary (ckpt/snapshot_slots.h: two slots per rank in --snapshot-dir, written in the
// background), and --resume auto's choice among disk checkpoints and snapshots. Private to
// src/train (the trainer's set-up and loop call it).
//
// Layout: SNAPDIR/rank-RRRRR/step-NNNNNNNN/ (manifest.json + one HDF5 shard; meta "snapshot" =
// {job, config, rank, world_size, global_batch, host, sharded}). The default SNAPDIR is
// /dev/shm/hpctrain-<16 hex digits of the job key>-<16 of the config fingerprint>.
// - DDP (--zero 0): each rank's snapshot is the whole training state (every rank holds it
//   anyway), so every host keeps every part and no copy is sent.
// - ZeRO-1/2/3: each rank's snapshot holds the progress tensors and only its own optimizer shard
//   (TrainOptimizer::capture_own_shard: no collective); under ZeRO-1/2 the model (replicated),
//   under --zero 3 only this rank's parameter blocks (one per unit, root last:
//   FsdpEngine::param_blocks(), ckpt/zero_state.h zero3/r<rank>.b<unit>) beside the replicated
//   buffers and frozen parameters. Each rank sends a copy of it to a rank on the next host
//   (train/snapshot_copy.h), kept there as SNAPDIR/copy-of-rank-RRRRR/step-N. After any one host
//   is lost every shard still exists.
//
// Contract:
// - Constructor (collective, on every rank): checks the directory (exit 2 naming it when
//   --snapshot-dir is not writable or not tmpfs/ramfs), and the room for two slots per local
//   rank plus two per copy this host receives: without it one warning line and snapshots stay
//   off on every rank.
// - busy_vote() / settle(total): the step boundary's vote (train/step_boundary.h): 1 while this
//   rank's write or copy is in flight; a total > 0 makes every rank skip the next snapshot
//   together, so the ranks' snapshots (two per directory, ckpt/snapshot_slots.h) always share a
//   step that every rank committed.
// - pick() (collective): the newest state every rank can load, one decision for all ranks.
//   ZeRO-1/2/3: the newest step for which every rank of the saving run has a shard on some host
//   (its own memory or a copy); each shard is broadcast from its lowest holder and the gathered
//   layout is assembled, stage 3's parameter blocks joined into per-parameter tensors through the
//   recorded partition (unshard_parameters), so the restore path reshards it for this run's
//   world size as it does a disk checkpoint. A run of another --zero stage has another config
//   fingerprint: it does not use these snapshots (only disk checkpoints cross stages).
// - save() at the step boundary (local: no collective at any stage), before_update() before
//   each optimizer step (local), finish() after a clean run (collective: waits for the writes
//   and copies, then removes them).
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
class SnapshotCopies;
class SnapshotSlots;
class TrainOptimizer;
class World;

class SnapshotSession {
 public:
  // state_bytes: one rank's snapshot; shards: the optimizer captures its own shard locally
  // (ZeRO-1/2/3, TrainOptimizer::shards_capture_locally()).
  SnapshotSession(const TrainConfig& cfg, World& world, Reporter& rep, int64_t state_bytes, bool shards);
  ~SnapshotSession();
  bool on() const { return on_; }
  const std::string& dir() const { return dir_; }

  // Collective. With --resume auto: when a snapshot is newer than `disk_step` (-1: no disk
  // checkpoint), every rank gets that state (read from its host's memory, or sent over MPI from
  // a rank whose host holds it) and a line saying where it came from. nullopt: use the disk.
  struct Picked {
    CheckpointState state;
    std::string source;  // "snapshot step 41: rank 0's shard from host node0's memory, ..."
    int64_t step = -1;
  };
  std::optional<Picked> pick(int64_t disk_step, c10::Device device);

  // Called on every rank after every step boundary; snapshots every --snapshot-every steps.
  void save(const TrainProgress& p, Model& model, TrainOptimizer& opt);
  void before_update();
  int64_t busy_vote() const;
  void settle(int64_t busy_total) { skip_next_ = busy_total > 0; }
  bool skips_next() const { return skip_next_; }  // alike on every rank (the vote's total)
  void finish();                                  // collective: waits, then removes this job's snapshots
  int64_t taken() const { return taken_; }
  int64_t skipped() const { return skipped_; }

 private:
  std::optional<Picked> pick_whole(int64_t disk_step, c10::Device device);   // snapshot_resume.cpp
  std::optional<Picked> pick_shards(int64_t disk_step, c10::Device device);  // snapshot_pick_shards.cpp
  void remove_newer_than(int64_t step);  // after a pick: what a later resume must not mistake for this run's

  const TrainConfig& cfg_;
  World& world_;
  Reporter& rep_;
  bool on_ = false;
  std::string dir_, job_, config_fp_;
  bool shards_ = false;
  std::unique_ptr<SnapshotCopies> copies_;  // ZeRO on more than one host
  std::unique_ptr<SnapshotSlots> slots_;
  int64_t taken_ = 0, skipped_ = 0;
  bool warned_ = false, broken_ = false, skip_next_ = false;
};

// The job key and config fingerprint snapshots carry (16 hex digits each), and the default dir.
std::string snapshot_job_key(const TrainConfig& cfg);
std::string snapshot_config_fingerprint(const TrainConfig& cfg);

}  // namespace hpctrain
