// CheckpointSession: the trainer's checkpoint side in one place: the writer (opened when the
// run has a --ckpt-dir), --resume, what a checkpoint holds beyond the train state (metadata,
// a TorchScript model's own file), the capture timing and the per-checkpoint metrics records.
// Private to src/train (the trainer's set-up and loop call it).
//
// Contract:
// - Collective where the writer is (constructor, save, settle, finish): every rank calls them
//   at the same points. Without --ckpt-dir every call is a local no-op.
// - resume() reads files only; every rank reads the same ones and reaches the same decision.
// - The step boundary (train/step_boundary.h) carries vote() in its one allreduce and hands
//   the sums to settle(), which raises a failed write on every rank and emits the records.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "ckpt/checkpoint.h"
#include "model/model_registry.h"
#include "train/config.h"
#include "train/train_state.h"

namespace hpctrain {

class TrainOptimizer;

class Communicator;
class Reporter;
class Model;
struct DatasetInfo;

class CheckpointSession {
 public:
  CheckpointSession(const TrainConfig& cfg, Communicator& comm, const ModelEntry& entry, Reporter& rep);
  ~CheckpointSession();
  bool writes() const { return writer_ != nullptr; }

  // --resume auto|none|PATH: restores model and optimizer; the progress to continue from, or
  // nullopt to start fresh. `global_batch` is only reported.
  std::optional<TrainProgress> resume(Model& model, TrainOptimizer& opt, c10::Device device, int world_size,
                                      int64_t global_batch);
  // The step of the checkpoint resume() would take (-1: none; found once, then kept), and
  // the same restore from a state read elsewhere (a snapshot: train/snapshot_session.h).
  int64_t resume_step();
  TrainProgress restore(const CheckpointState& st, const std::string& source, Model& model, TrainOptimizer& opt,
                        int world_size, int64_t global_batch);
  // Captures the state at `p` and starts writing it (with `sync`, returns once committed).
  // Without `sync` (and with --ckpt-async) the parameters and optimizer state are copied on
  // the writer thread: before_update() must come before the next optimizer step.
  void save(const TrainProgress& p, Model& model, TrainOptimizer& opt, const DatasetInfo& info, bool sync);
  // Local: waits until the checkpoint in flight holds its own copy of what the optimizer step
  // is about to change (at once almost always: the copy runs during forward and backward).
  void before_update();
  // One metrics record per committed checkpoint since the last call; `final_step` marks one.
  void report(int64_t final_step = -1);

  CheckpointWriter::BoundaryVote vote();
  void settle(int64_t errors, int64_t pending);
  void finish();

 private:
  const TrainConfig& cfg_;
  const ModelEntry& entry_;
  Reporter& rep_;
  std::unique_ptr<CheckpointWriter> writer_;
  at::Tensor archive_tensor_;            // entry_.archive as uint8, for checkpoints
  std::optional<std::optional<std::string>> resume_path_;  // find_resume's answer, once asked
  std::map<int64_t, double> capture_s_;  // checkpoint step -> time to gather its state (stall)
};

}  // namespace hpctrain
