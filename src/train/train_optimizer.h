// TrainOptimizer: the optimizer step as the trainer drives it, replicated (DDP) or sharded
// (ZeRO-1, --zero 1).
//
// Contract:
// - step(): unscales the gradient (fp16; the inf/NaN verdict is agreed over all ranks), clips it
//   to the exact global L2 norm, updates the parameters and returns true; on an overflow it
//   changes nothing and returns false. Collective whenever a collective is needed.
//   * replicated: torch::optim SGD/AdamW over every parameter's averaged .grad.
//   * sharded: ShardedOptimizer over this rank's gradient shard (DDP's grad_blocks()); the
//     clip norm sums every shard's squared norm (one allreduce), then the updated parameter
//     blocks are allgathered, so every rank ends the step with identical parameters.
// - capture(): appends the optimizer's checkpoint tensors. Replicated: optim/<param>.<slot>
//   (train_state.h). Sharded: optim/zero/r<k>.<slot> (rank k's flat shard of each slot),
//   optim/zero/step (AdamW) and meta "zero" (the partition: ddp/zero_partition.h). Collective
//   for the sharded one: rank 0 writes every rank's shard, so the shards are gathered.
// - restore(): loads either layout whatever this run's mode and world size (ckpt/zero_state.h
//   turns sharded state into per-parameter state; the sharded optimizer re-slices it for its
//   own partition). A partition record that disagrees with its shards is an error naming it.
// - state_bytes(): this rank's optimizer state (optim_state_bytes_per_rank).
#pragma once

#include <memory>

#include "ckpt/checkpoint.h"
#include "train/config.h"

namespace hpctrain {

class Communicator;
class DistributedDataParallel;
class LossScaler;
class Model;

class TrainOptimizer {
 public:
  virtual ~TrainOptimizer() = default;
  virtual void set_lr(double lr) = 0;
  virtual bool step(LossScaler& scaler, double clip_norm) = 0;
  virtual void capture(CheckpointState& st) = 0;
  virtual void restore(const CheckpointState& st, const std::string& source) = 0;
  virtual int64_t state_bytes() const = 0;
  virtual bool sharded() const = 0;
};

// The replicated optimizer with --zero 0, the sharded one with --zero 1 (ddp built with zero).
std::unique_ptr<TrainOptimizer> make_train_optimizer(const TrainConfig& c, Model& model, DistributedDataParallel& ddp,
                                                     Communicator& comm, double base_lr);

}  // namespace hpctrain
