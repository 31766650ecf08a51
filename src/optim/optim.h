// Optimizer, learning-rate schedule and gradient clipping for the trainer.
//
// Contract:
// - make_optimizer: SGD (momentum, nesterov, weight decay) or AdamW, over the model's
//   parameters in registration order.
// - lr_at(step): linear warmup from lr/warmup to lr over `warmup_steps`, then constant,
//   cosine (to min_lr at total_steps), step decay (x gamma every step_size) or wsd
//   (warmup-stable-decay): the base lr until the last D = ceil(decay_frac x total_steps) steps,
//   then a linear fall, lr_at(total - D + k) = min_lr + (lr - min_lr) x (D - k) / D for k in
//   [0, D), so the first decay step has the base lr and the lr would reach min_lr at total_steps
//   (warmup wins over decay where they overlap). With the linear scaling rule the base lr is
//   lr * global_batch / lr_ref_batch (min_lr is not scaled).
// - clip_grad_norm: global L2 norm over all gradients; after DDP's allreduce the gradients are
//   identical on every rank, so every rank computes the same norm and the same scale. max_norm
//   <= 0 only measures; a non-finite norm is returned and nothing is scaled.
#pragma once

#include <torch/optim/optimizer.h>

#include <memory>

#include "optim/optim_config.h"

namespace hpctrain {

class Communicator;

// `decay[i]`: whether --weight-decay applies to params[i] (Model::decays); empty: to all. With
// some off, the optimizer has two parameter groups (decayed first), the second with decay 0.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimConfig& c, std::vector<at::Tensor> params,
                                                        double base_lr, const std::vector<bool>& decay = {});

class LrSchedule {
 public:
  LrSchedule(const OptimConfig& c, double base_lr, int64_t total_steps);
  double lr_at(int64_t step) const;  // step counts from 0
  void apply(torch::optim::Optimizer& opt, int64_t step) const;
  double base_lr() const { return base_lr_; }

 private:
  OptimConfig c_;
  double base_lr_;
  int64_t total_;
};

// Base lr after the optional linear scaling rule.
double scaled_lr(const OptimConfig& c, int64_t global_batch);

// Scales gradients so their global L2 norm is at most max_norm; returns the norm before.
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);

// The same for ZeRO-1 gradient shards: each rank's squared norm is summed over ranks (one
// allreduce, collective), so the norm and the scale are the global ones on every rank.
double clip_grad_norm_sharded(const std::vector<at::Tensor>& grad_blocks, double max_norm, Communicator& comm);

}  // namespace hpctrain
