// ModuleModel: a torch::nn::Module with a one-tensor forward behind the Model interface
// (names, train/eval mode and device moves come from the module), and count_parameters.
#include "model/model.h"

#include <torch/nn/module.h>

#include "runtime/check.h"

namespace hpctrain {

ModuleModel::ModuleModel(std::shared_ptr<torch::nn::Module> module, ForwardFn forward)
    : module_(std::move(module)), forward_(std::move(forward)) {}

NamedTensors ModuleModel::named_parameters() {
  NamedTensors out;
  for (auto& item : module_->named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  return out;
}

NamedTensors ModuleModel::named_buffers() {
  NamedTensors out;
  for (auto& item : module_->named_buffers(/*recurse=*/true))
    if (item.value().defined()) out.emplace_back(item.key(), item.value());
  return out;
}

void ModuleModel::train(bool on) { module_->train(on); }
bool ModuleModel::is_training() const { return module_->is_training(); }
void ModuleModel::to(c10::Device device) { module_->to(device); }

std::map<std::string, std::string> parse_model_config(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t p = 0;
  while (p < text.size()) {
    size_t e = text.find(',', p);
    if (e == std::string::npos) e = text.size();
    std::string part = text.substr(p, e - p);
    p = e + 1;
    if (part.empty()) continue;
    size_t eq = part.find('=');
    if (eq == std::string::npos || eq == 0)
      throw CollectiveError("--model-config: \"" + part + "\" is not key=value (e.g. n_layer=4,n_head=4)");
    std::string key = part.substr(0, eq);
    if (!out.emplace(key, part.substr(eq + 1)).second)
      throw CollectiveError("--model-config: key " + key + " is given twice");
  }
  return out;
}

int64_t count_parameters(Model& m) {
  int64_t n = 0;
  for (auto& [name, p] : m.named_parameters()) n += p.numel();
  return n;
}

}  // namespace hpctrain
