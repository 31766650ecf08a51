// ShardedOptimizer: SGD and AdamW updates on this rank's ZeRO-1 blocks, with the state
// kept per block so checkpoints can reshard it.
#include "optim/sharded_optim.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>

#include "runtime/check.h"

namespace hpctrain {

void check_sharded_optimizer(const std::string& name) {
  if (name != "sgd" && name != "adamw")
    throw Error("--zero 1/2: optimizer '" + name + "' has no sharded implementation (sgd and adamw do)");
}

ShardedOptimizer::ShardedOptimizer(ShardedOptimOptions opts, std::vector<at::Tensor> param_blocks,
                                   std::vector<at::Tensor> grad_blocks)
    : opts_(std::move(opts)), params_(std::move(param_blocks)), grads_(std::move(grad_blocks)) {
  check_sharded_optimizer(opts_.name);
  if (params_.size() != grads_.size()) throw Error("sharded optimizer: parameter and gradient block counts differ");
  for (size_t b = 0; b < params_.size(); ++b) {
    if (params_[b].numel() != grads_[b].numel())
      throw Error("sharded optimizer: block " + std::to_string(b) + " has " + std::to_string(params_[b].numel()) +
                  " parameters but " + std::to_string(grads_[b].numel()) + " gradients");
    offsets_.push_back(numel_);
    numel_ += params_[b].numel();
  }
  if (opts_.name == "adamw") {
    slot("exp_avg");
    slot("exp_avg_sq");
  }
}

void ShardedOptimizer::set_decay_masks(std::vector<at::Tensor> masks) {
  if (masks.size() != params_.size()) throw Error("sharded optimizer: one decay mask per block is needed");
  for (size_t b = 0; b < masks.size(); ++b)
    if (masks[b].numel() != params_[b].numel())
      throw Error("sharded optimizer: decay mask " + std::to_string(b) + " does not match its block");
  decay_masks_ = std::move(masks);
}

at::Tensor& ShardedOptimizer::slot(const std::string& name) {
  at::Tensor& t = slots_[name];
  if (!t.defined()) t = at::zeros({numel_}, params_.empty() ? at::TensorOptions() : params_[0].options());
  return t;
}

std::vector<at::Tensor> ShardedOptimizer::views(const at::Tensor& flat) const {
  std::vector<at::Tensor> v;
  for (size_t b = 0; b < params_.size(); ++b) v.push_back(flat.narrow(0, offsets_[b], params_[b].numel()));
  return v;
}

std::vector<std::string> ShardedOptimizer::slot_names() const {
  if (opts_.name == "adamw") return {"exp_avg", "exp_avg_sq"};
  if (opts_.momentum != 0) return {"momentum_buffer"};
  return {};
}

void ShardedOptimizer::step() {
  at::NoGradGuard no_grad;
  ++steps_;
  const double lr = opts_.lr;
  if (opts_.name == "adamw") {
    auto m = views(slot("exp_avg")), v = views(slot("exp_avg_sq"));
    const double bc1 = 1 - std::pow(opts_.beta1, static_cast<double>(steps_));
    const double bc2 = 1 - std::pow(opts_.beta2, static_cast<double>(steps_));
    for (size_t b = 0; b < params_.size(); ++b) {
      at::Tensor &p = params_[b], &g = grads_[b];
      if (decay_masks_.empty())
        p.mul_(1 - lr * opts_.weight_decay);
      else if (opts_.weight_decay != 0)
        p.copy_(at::where(decay_masks_[b], p * (1 - lr * opts_.weight_decay), p));
      m[b].mul_(opts_.beta1).add_(g, 1 - opts_.beta1);
      v[b].mul_(opts_.beta2).addcmul_(g, g, 1 - opts_.beta2);
      at::Tensor denom = (v[b].sqrt() / std::sqrt(bc2)).add_(opts_.eps);
      p.addcdiv_(m[b], denom, -lr / bc1);
    }
    return;
  }
  bool fresh = opts_.momentum != 0 && !slots_.count("momentum_buffer");
  std::vector<at::Tensor> buf;
  if (opts_.momentum != 0) buf = views(slot("momentum_buffer"));
  for (size_t b = 0; b < params_.size(); ++b) {
    at::Tensor& p = params_[b];
    at::Tensor d = grads_[b];
    if (opts_.weight_decay != 0)
      d = decay_masks_.empty() ? d.add(p, opts_.weight_decay)
                               : at::where(decay_masks_[b], d.add(p, opts_.weight_decay), d);
    if (opts_.momentum != 0) {
      if (fresh)
        buf[b].copy_(d);
      else
        buf[b].mul_(opts_.momentum).add_(d, 1.0);  // dampening 0, as the trainer's SGD
      d = opts_.nesterov ? d.add(buf[b], opts_.momentum) : buf[b];
    }
    p.add_(d, -lr);
  }
}

std::map<std::string, at::Tensor> ShardedOptimizer::state() const { return slots_; }

void ShardedOptimizer::load_state(const std::map<std::string, at::Tensor>& slots, int64_t steps) {
  for (const auto& [name, t] : slots)
    if (t.numel() != numel_)
      throw Error("sharded optimizer: saved slot " + name + " has " + std::to_string(t.numel()) +
                  " elements, this rank's shard " + std::to_string(numel_));
  slots_.clear();
  for (const auto& [name, t] : slots) slot(name).copy_(t.reshape({-1}));
  if (opts_.name == "adamw") {
    slot("exp_avg");
    slot("exp_avg_sq");
  }
  steps_ = steps;
}

int64_t ShardedOptimizer::state_bytes() const {
  int64_t n = 0;
  for (const auto& [name, t] : slots_) n += t.nbytes();
  // SGD's momentum buffer appears after the first step: count it from the start.
  if (opts_.name == "sgd" && opts_.momentum != 0 && !slots_.count("momentum_buffer") && !params_.empty())
    n += numel_ * static_cast<int64_t>(params_[0].element_size());
  return n;
}

}  // namespace hpctrain
