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

  // Tied names (one tensor under two names, as PyTorch's state_dict() lists them): the state
  // must hold the first name; another name is optional (hpctrain stores a shared tensor once,
  // a merged file or a PyTorch state_dict has every name) and, when there, must hold the same
  // values.
  TiedSplit tied = split_tied(model);
  std::map<std::string, at::Tensor> target(tied.unique.begin(), tied.unique.end());
  std::vector<std::string> differ;
  for (const auto& [alias, name] : tied.aliases) {
    auto a = saved.find(alias), n = saved.find(name);
    if (a == saved.end()) continue;
    if (n != saved.end() && !(a->second.sizes() == n->second.sizes() && at::equal(a->second, n->second.to(a->second.dtype()))))
      differ.push_back(alias + " vs " + name);
    if (n == saved.end()) saved.emplace(name, a->second);  // only the other name saved: load it from there
    saved.erase(alias);
  }
  if (!differ.empty())
    throw Error(source + ": tied parameters (one tensor in the model) hold different values: " + join(differ));

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
