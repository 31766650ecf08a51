// ShardedOptimizer: SGD and AdamW stepping a rank's ZeRO-1 shard of the flat parameter space.
//
// Contract:
// - The shard is a list of blocks (one per DDP bucket, ddp/zero_partition.h): parameter block
//   and averaged-gradient block, same numel and dtype. Optimizer state (SGD momentum_buffer;
//   AdamW exp_avg, exp_avg_sq) is one flat tensor per slot over the whole shard, so a rank
//   holds 1/world of it; padding elements stay zero (zero gradient, zero parameter).
// - The update is elementwise and the same arithmetic as torch::optim::SGD / AdamW (SGD:
//   weight decay added to the gradient, momentum buffer cloned on the first step, nesterov;
//   AdamW: decoupled decay p *= 1 - lr*wd, bias corrections, denom = sqrt(v)/sqrt(bc2) + eps),
//   so a sharded step equals the replicated one element for element.
// - state() / load_state(): the flat slot tensors (and AdamW's step count) for checkpoints.
// - make_sharded_optimizer throws hpctrain::Error for an optimizer without a sharded
//   implementation (every optimizer the trainer offers has one).
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace hpctrain {

struct ShardedOptimOptions {
  std::string name = "sgd";  // sgd | adamw
  double lr = 0.01, momentum = 0, weight_decay = 0;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // AdamW (torch's defaults)
};

class ShardedOptimizer {
 public:
  ShardedOptimizer(ShardedOptimOptions opts, std::vector<at::Tensor> param_blocks, std::vector<at::Tensor> grad_blocks);
  void set_lr(double lr) { opts_.lr = lr; }
  // Weight decay per element: one bool block per parameter block, true where --weight-decay
  // applies (Model::decays); without masks it applies everywhere. The decayed elements get the
  // same arithmetic as before, the others none (as torch::optim with weight_decay 0).
  void set_decay_masks(std::vector<at::Tensor> masks);
  double lr() const { return opts_.lr; }
  void step();

  const ShardedOptimOptions& options() const { return opts_; }
  // Slot name -> flat state over the shard; undefined slots (SGD before its first step) absent.
  std::map<std::string, at::Tensor> state() const;
  int64_t steps() const { return steps_; }
  // Replaces the state; each tensor must have the shard's numel. Missing slots start fresh.
  void load_state(const std::map<std::string, at::Tensor>& slots, int64_t steps);
  // The slot names this optimizer keeps ("momentum_buffer" | "exp_avg", "exp_avg_sq").
  std::vector<std::string> slot_names() const;
  int64_t state_bytes() const;
  int64_t shard_numel() const { return numel_; }

 private:
  at::Tensor& slot(const std::string& name);
  std::vector<at::Tensor> views(const at::Tensor& flat) const;

  ShardedOptimOptions opts_;
  std::vector<at::Tensor> params_, grads_;
  std::vector<int64_t> offsets_;
  int64_t numel_ = 0, steps_ = 0;
  std::map<std::string, at::Tensor> slots_;
  std::vector<at::Tensor> decay_masks_;
};

// Checks the optimizer has a sharded implementation; throws hpctrain::Error otherwise.
void check_sharded_optimizer(const std::string& name);

}  // namespace hpctrain
