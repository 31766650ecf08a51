// Trainer state <-> checkpoint tensors and metadata. Optimizer slots are listed in the model's
// parameter order, not opt.state()'s hash-map order, so every rank lists the same tensors in
// the same order (--ckpt-writers all cuts its shard plan from that list).
#include "train/train_state.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <map>
#include <optional>

#include "ddp/ddp.h"
#include "runtime/check.h"

namespace hpctrain {
namespace {

// The CUDA device the model's parameters live on, if any: its default generator draws the
// run's GPU random numbers (dropout masks, augmentations on the GPU).
std::optional<c10::Device> cuda_device_of(Model& model) {
  for (const auto& [name, t] : model.named_parameters())
    if (t.defined() && t.is_cuda()) return t.device();
  return std::nullopt;
}

}  // namespace
namespace {

std::map<void*, std::string> param_names(Model& model) {
  std::map<void*, std::string> names;
  for (auto& [name, p] : model.named_parameters()) names[p.unsafeGetTensorImpl()] = name;
  return names;
}

}  // namespace

CheckpointState capture_train_state(Model& model, torch::optim::Optimizer& opt, const TrainProgress& p,
                                    const nlohmann::json& extra_meta) {
  CheckpointState st = capture_model_state(model, p, extra_meta);
  append_optimizer_state(st, model, opt);
  return st;
}

TrainProgress restore_train_state(const CheckpointState& st, Model& model, torch::optim::Optimizer& opt) {
  TrainProgress p = restore_model_state(st, model);
  restore_optimizer_state(st, model, opt);
  return p;
}

CheckpointState capture_model_state(Model& model, const TrainProgress& p, const nlohmann::json& extra_meta,
                                    bool copy_buffers) {
  CheckpointState st;
  for (auto& [name, p] : model.named_parameters()) st.tensors.emplace_back("model/" + name, p.detach());
  for (auto& [name, b] : model.named_buffers())
    if (b.defined()) st.tensors.emplace_back("model/" + name, copy_buffers ? b.detach().clone() : b);
  st.tensors.emplace_back("state/rng.cpu", at::detail::getDefaultCPUGenerator().get_state());
  if (auto dev = cuda_device_of(model))
    st.tensors.emplace_back("state/rng.cuda", at::globalContext().defaultGenerator(*dev).get_state());
  st.meta = extra_meta;
  // Tied weights are stored once, under their first name; `ckpt merge` writes the other names.
  if (auto tied = model.tied_names(); !tied.empty()) {
    nlohmann::json aliases = nlohmann::json::object();
    for (const auto& [alias, name] : tied) aliases[alias] = name;
    st.meta["tied"] = aliases;
  }
  st.meta["epoch"] = p.epoch;
  st.meta["train_step"] = p.step;
  st.meta["sampler"] = {{"epoch", p.sampler.epoch}, {"samples_consumed", p.sampler.samples_consumed}};
  st.meta["scaler"] = {{"scale", p.scaler_scale}, {"good_steps", p.scaler_good}};
  return st;
}

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

void load_model_tensors(const CheckpointState& st, Model& model) {
  load_model_state(st, state_dict_names(model), "checkpoint");
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

TrainProgress restore_model_state(const CheckpointState& st, Model& model) {
  load_model_tensors(st, model);
  std::map<std::string, at::Tensor> saved;
  for (auto& [name, t] : st.tensors) saved[name] = t;
  if (auto it = saved.find("state/rng.cpu"); it != saved.end()) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    gen.set_state(it->second.cpu());
  }
  // A CPU checkpoint resumed on a GPU (or the reverse) has no generator state to carry over.
  if (auto it = saved.find("state/rng.cuda"); it != saved.end())
    if (auto dev = cuda_device_of(model)) {
      at::Generator gen = at::globalContext().defaultGenerator(*dev);
      gen.set_state(it->second.cpu());
    }
  TrainProgress p;
  const auto& m = st.meta;
  p.epoch = m.value("epoch", int64_t{0});
  p.step = m.value("train_step", int64_t{0});
  if (m.contains("sampler")) {
    p.sampler.epoch = m["sampler"].value("epoch", int64_t{0});
    p.sampler.samples_consumed = m["sampler"].value("samples_consumed", int64_t{0});
  }
  if (m.contains("scaler")) {
    p.scaler_scale = m["scaler"].value("scale", 65536.0);
    p.scaler_good = m["scaler"].value("good_steps", int64_t{0});
  }
  return p;
}

}  // namespace hpctrain
