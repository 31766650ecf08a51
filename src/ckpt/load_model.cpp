// load_model: checkpoint `model/` tensors -> a torch::nn::Module, with a readable mismatch
// report instead of a crash when the checkpoint belongs to another model.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/module.h>

#include <map>

#include "ckpt/checkpoint.h"
#include "runtime/check.h"

namespace hpctrain {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return "[" + s + "]";
}

// "[512,64]"
std::string dims(at::IntArrayRef sizes) {
  std::vector<std::string> v;
  for (auto d : sizes) v.push_back(std::to_string(d));
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return "[" + s + "]";
}

}  // namespace

void load_model(const std::string& path, torch::nn::Module& model, c10::Device device) {
  load_model_state(read_checkpoint(path, device), model, "checkpoint " + path);
}

void load_model_state(const CheckpointState& st, torch::nn::Module& model, const std::string& source) {
  NamedTensors target;
  for (const auto& p : model.named_parameters(/*recurse=*/true)) target.emplace_back(p.key(), p.value());
  for (const auto& b : model.named_buffers(/*recurse=*/true))
    if (b.value().defined()) target.emplace_back(b.key(), b.value());
  load_model_state(st, target, source);
}

void load_model_state(const CheckpointState& st, const NamedTensors& model, const std::string& source) {
  std::map<std::string, at::Tensor> saved;
  for (auto& [name, t] : st.tensors)
    if (name.rfind("model/", 0) == 0) saved.emplace(name.substr(6), t);

  std::map<std::string, at::Tensor> target(model.begin(), model.end());

  std::vector<std::string> missing, unexpected, shapes;
  for (const auto& [name, t] : target) {
    auto it = saved.find(name);
    if (it == saved.end())
      missing.push_back(name);
    else if (it->second.sizes() != t.sizes())
      shapes.push_back(name + ": saved " + dims(it->second.sizes()) + " vs model " + dims(t.sizes()));
  }
  for (const auto& [name, t] : saved)
    if (!target.count(name)) unexpected.push_back(name);
  if (!missing.empty() || !unexpected.empty() || !shapes.empty())
    throw Error(source + " does not match the model: missing keys " + join(missing) + "; unexpected keys " +
                join(unexpected) + "; shape mismatches " + join(shapes));

  at::NoGradGuard no_grad;
  for (auto& [name, t] : target) t.copy_(saved.at(name));  // copy_ converts dtype and device
}

}  // namespace hpctrain
