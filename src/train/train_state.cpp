// Trainer state <-> checkpoint tensors and metadata (the optimizer's part: optim/optim_state.h).
#include "train/train_state.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <map>
#include <optional>

#include "ddp/ddp.h"
#include "optim/optim_state.h"
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


void load_model_tensors(const CheckpointState& st, Model& model) {
  load_model_state(st, state_dict_names(model), "checkpoint");
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
