// SGD or AdamW from LibTorch, the lr schedule and gradient clipping. The ZeRO-1 variant sums
// squared shard norms in fp64 on the CPU and allreduces that one value.
#include "optim/optim.h"

#include <ATen/ATen.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>

#include "comm/blocking.h"
#include "comm/communicator.h"

namespace hpctrain {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimConfig& c, std::vector<at::Tensor> params,
                                                        double base_lr, const std::vector<bool>& decay) {
  auto adamw = [&](double wd) { return torch::optim::AdamWOptions(base_lr).weight_decay(wd); };
  auto sgd = [&](double wd) {
    return torch::optim::SGDOptions(base_lr)
        .momentum(c.momentum)
        .nesterov(c.nesterov && c.momentum > 0)
        .weight_decay(wd);
  };
  const bool split = std::find(decay.begin(), decay.end(), false) != decay.end();
  if (!split) {
    if (c.optimizer == "adamw") return std::make_unique<torch::optim::AdamW>(params, adamw(c.weight_decay));
    return std::make_unique<torch::optim::SGD>(params, sgd(c.weight_decay));
  }
  std::vector<at::Tensor> on, off;
  for (size_t i = 0; i < params.size(); ++i) (decay.at(i) ? on : off).push_back(params[i]);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (c.optimizer == "adamw") {
    if (!on.empty()) groups.emplace_back(on, std::make_unique<torch::optim::AdamWOptions>(adamw(c.weight_decay)));
    groups.emplace_back(off, std::make_unique<torch::optim::AdamWOptions>(adamw(0)));
    return std::make_unique<torch::optim::AdamW>(std::move(groups), adamw(c.weight_decay));
  }
  if (!on.empty()) groups.emplace_back(on, std::make_unique<torch::optim::SGDOptions>(sgd(c.weight_decay)));
  groups.emplace_back(off, std::make_unique<torch::optim::SGDOptions>(sgd(0)));
  return std::make_unique<torch::optim::SGD>(std::move(groups), sgd(c.weight_decay));
}

double scaled_lr(const OptimConfig& c, int64_t global_batch) {
  return c.lr_ref_batch > 0 ? c.lr * static_cast<double>(global_batch) / c.lr_ref_batch : c.lr;
}

LrSchedule::LrSchedule(const OptimConfig& c, double base_lr, int64_t total_steps)
    : c_(c), base_lr_(base_lr), total_(std::max<int64_t>(total_steps, 1)) {}

double LrSchedule::lr_at(int64_t step) const {
  if (c_.warmup_steps > 0 && step < c_.warmup_steps) return base_lr_ * static_cast<double>(step + 1) / c_.warmup_steps;
  int64_t t = step - c_.warmup_steps;
  if (c_.schedule == "cosine") {
    int64_t span = std::max<int64_t>(total_ - c_.warmup_steps, 1);
    double frac = std::min(1.0, static_cast<double>(t) / span);
    return c_.min_lr + (base_lr_ - c_.min_lr) * 0.5 * (1.0 + std::cos(M_PI * frac));
  }
  if (c_.schedule == "wsd") {
    const int64_t decay = std::min<int64_t>(total_, static_cast<int64_t>(std::ceil(c_.decay_frac * total_ - 1e-9)));
    const int64_t into = step - (total_ - decay);  // steps into the decay phase
    if (into < 0) return base_lr_;
    return c_.min_lr + (base_lr_ - c_.min_lr) * static_cast<double>(std::max<int64_t>(decay - into, 0)) / decay;
  }
  if (c_.schedule == "step") return base_lr_ * std::pow(c_.gamma, static_cast<double>(t / c_.step_size));
  return base_lr_;
}

void LrSchedule::apply(torch::optim::Optimizer& opt, int64_t step) const {
  double lr = lr_at(step);
  for (auto& group : opt.param_groups()) group.options().set_lr(lr);
}

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  std::vector<at::Tensor> norms;
  for (auto& p : params)
    if (p.grad().defined()) norms.push_back(p.grad().detach().to(at::kFloat).norm(2).reshape({1}));
  if (norms.empty()) return 0;
  double total = at::cat(norms).norm(2).item<double>();
  if (max_norm > 0 && std::isfinite(total) && total > max_norm) {
    double scale = max_norm / (total + 1e-6);
    for (auto& p : params)
      if (p.grad().defined()) p.grad().detach().mul_(scale);
  }
  return total;
}

double clip_grad_norm_sharded(const std::vector<at::Tensor>& grad_blocks, double max_norm, Communicator& comm) {
  at::Tensor sq = at::zeros({1}, at::kDouble);
  for (const auto& g : grad_blocks) sq += g.detach().to(at::kDouble).pow(2).sum().cpu();
  if (comm.size() > 1) {
    allreduce_now(comm, sq, ReduceOp::kSum, "zero.grad_norm");
  }
  double total = std::sqrt(sq.item<double>());
  if (max_norm > 0 && std::isfinite(total) && total > max_norm) {
    double scale = max_norm / (total + 1e-6);
    for (const auto& g : grad_blocks) g.detach().mul_(scale);
  }
  return total;
}

}  // namespace hpctrain
