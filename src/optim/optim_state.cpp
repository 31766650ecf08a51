// A torch::optim optimizer's state <-> checkpoint tensors. Slots are listed in the model's
// parameter order, not opt.state()'s hash-map order, so every rank lists the same tensors in
// the same order (--ckpt-writers all cuts its shard plan from that list).
#include "optim/optim_state.h"

#include <ATen/ATen.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <map>
#include <string>

namespace hpctrain {
namespace {

std::map<void*, std::string> param_names(Model& model) {
  std::map<void*, std::string> names;
  for (auto& [name, p] : model.named_parameters()) names[p.unsafeGetTensorImpl()] = name;
  return names;
}

}  // namespace

void append_optimizer_state(CheckpointState& st, Model& model, torch::optim::Optimizer& opt) {
  // In the model's parameter order: opt.state() is a hash map keyed by each parameter's address,
  // whose order differs between processes, and --ckpt-writers all needs every rank to list the
  // same tensors in the same order (its shard plan is cut from that list on each rank).
  auto& states = opt.state();
  for (auto& [name, p] : model.named_parameters()) {
    auto found = states.find(p.unsafeGetTensorImpl());
    if (found == states.end()) continue;
    auto& state = found->second;
    const std::string base = "optim/" + name;
    if (auto* s = dynamic_cast<torch::optim::SGDParamState*>(state.get())) {
      if (s->momentum_buffer().defined()) st.tensors.emplace_back(base + ".momentum_buffer", s->momentum_buffer());
    } else if (auto* a = dynamic_cast<torch::optim::AdamWParamState*>(state.get())) {
      st.tensors.emplace_back(base + ".exp_avg", a->exp_avg());
      st.tensors.emplace_back(base + ".exp_avg_sq", a->exp_avg_sq());
      if (a->max_exp_avg_sq().defined()) st.tensors.emplace_back(base + ".max_exp_avg_sq", a->max_exp_avg_sq());
      st.tensors.emplace_back(base + ".step", at::scalar_tensor(a->step(), at::kLong));
    }
  }
}

void restore_optimizer_state(const CheckpointState& st, Model& model, torch::optim::Optimizer& opt) {
  std::map<std::string, at::Tensor> saved;
  for (auto& [name, t] : st.tensors) saved[name] = t;
  auto names = param_names(model);
  // Optimizer state: create each parameter's state object, then fill its slots by name.
  bool adamw = dynamic_cast<torch::optim::AdamW*>(&opt) != nullptr;
  for (auto& [key, pname] : names) {
    const std::string base = "optim/" + pname;
    auto get = [&](const std::string& slot) {
      auto it = saved.find(base + "." + slot);
      return it == saved.end() ? at::Tensor() : it->second;
    };
    if (adamw) {
      if (!get("exp_avg").defined()) continue;
      auto s = std::make_unique<torch::optim::AdamWParamState>();
      s->exp_avg(get("exp_avg").clone());
      s->exp_avg_sq(get("exp_avg_sq").clone());
      if (get("max_exp_avg_sq").defined()) s->max_exp_avg_sq(get("max_exp_avg_sq").clone());
      s->step(get("step").item<int64_t>());
      opt.state()[key] = std::move(s);
    } else {
      if (!get("momentum_buffer").defined()) continue;
      auto s = std::make_unique<torch::optim::SGDParamState>();
      s->momentum_buffer(get("momentum_buffer").clone());
      opt.state()[key] = std::move(s);
    }
  }
}

}  // namespace hpctrain
