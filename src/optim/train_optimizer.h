// TrainOptimizer: the optimizer step as the trainer drives it, replicated (DDP) or sharded
// (ZeRO-1 and ZeRO-2, --zero 1|2: the same optimizer over DDP's gradient shard).
//
// Contract:
// - step(): unscales the gradient (fp16; the inf/NaN verdict is agreed over all ranks), takes
//   its exact global L2 norm and clips it to clip_norm (> 0), updates the parameters and returns
//   {applied}. On an fp16 overflow it changes nothing: {skipped} (the scaler backs off). A
//   non-finite global norm otherwise (the loss or gradient went to inf/NaN, or a 16-bit gradient
//   reduction overflowed) changes nothing either: {diverged}, the same verdict on every rank
//   (the norm is of the reduced gradient). Collective whenever a collective is needed.
// - first_nonfinite_grad(): after a diverged step, the name of the first parameter (model
//   order) whose reduced gradient holds inf/NaN ("" if none does). Collective (sharded: each
//   rank looks at its shard, then one MIN allreduce).
//   * replicated: torch::optim SGD/AdamW over every parameter's averaged .grad.
//   * sharded: ShardedOptimizer over this rank's gradient shard (DDP's grad_blocks()); the
//     clip norm sums every shard's squared norm (one allreduce), then the updated parameter
//     blocks are allgathered, so every rank ends the step with identical parameters.
// - capture(): appends the optimizer's checkpoint tensors. Replicated: optim/<param>.<slot>
//   (train_state.h). Sharded: optim/zero/r<k>.<slot> (rank k's flat shard of each slot),
//   optim/zero/step (AdamW) and meta "zero" (the partition: ddp/zero_partition.h, plus
//   "stage": 1 or 2, the stage that wrote it; both stages write the same layout). Collective
//   for the sharded one: rank 0 writes every rank's shard, so the shards are gathered.
// - capture_own_shard() (ZeRO-1/2/3, shards_capture_locally() true): local, no collective:
//   the same layout with only this rank's shard, optim/zero/r<rank>.<slot> (aliases of the live
//   state: the caller copies them before the next step), optim/zero/step and meta "zero". Stage
//   3 also replaces the captured model/<param> of every sharded parameter by this rank's
//   parameter blocks (ckpt/zero_state.h capture_parameter_blocks, aliases too). Every rank's
//   capture_own_shard together hold what capture() holds (train/snapshot_session.h puts them
//   back together). Throws hpctrain::Error where shards_capture_locally() is false (replicated:
//   capture() is local anyway).
// - restore(): loads either layout whatever this run's mode and world size (ckpt/zero_state.h
//   turns sharded state into per-parameter state; the sharded optimizer re-slices it for its
//   own partition). A partition record that disagrees with its shards is an error naming it.
// - state_bytes(): this rank's optimizer state (optim_state_bytes_per_rank).
#pragma once

#include <memory>
#include <string>

#include "ckpt/checkpoint.h"
#include "optim/optim_config.h"

namespace hpctrain {

class Communicator;
class DistributedDataParallel;
class FsdpEngine;
class LossScaler;
class Model;

struct StepOutcome {
  enum Kind { kApplied, kSkipped, kDiverged } kind = kApplied;
  double grad_norm = 0;  // the global L2 norm before clipping (0 when skipped)
};

class TrainOptimizer {
 public:
  virtual ~TrainOptimizer() = default;
  virtual void set_lr(double lr) = 0;
  virtual StepOutcome step(LossScaler& scaler, double clip_norm) = 0;
  virtual std::string first_nonfinite_grad() = 0;
  virtual void capture(CheckpointState& st) = 0;
  virtual bool shards_capture_locally() const { return false; }
  virtual void capture_own_shard(CheckpointState& st);
  virtual void restore(const CheckpointState& st, const std::string& source) = 0;
  virtual int64_t state_bytes() const = 0;
  virtual bool sharded() const = 0;
};

// The replicated optimizer with --zero 0, the sharded one with --zero 1|2 (ddp built with zero).
std::unique_ptr<TrainOptimizer> make_train_optimizer(const OptimConfig& c, Model& model, DistributedDataParallel& ddp,
                                                     Communicator& comm, double base_lr);
// --zero 3: the sharded optimizer over the engine's unit shards (ddp/fsdp.h); nothing is
// gathered after the step (the next forward gathers each unit). Checkpoints as ZeRO-1's.
std::unique_ptr<TrainOptimizer> make_fsdp_train_optimizer(const OptimConfig& c, Model& model, FsdpEngine& engine,
                                                          Communicator& comm, double base_lr);

}  // namespace hpctrain
