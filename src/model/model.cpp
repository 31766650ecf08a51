// ModuleModel: a torch::nn::Module with a one-tensor forward behind the Model interface
// (names, train/eval mode and device moves come from the module), and count_parameters.
#include "model/model.h"

#include <torch/nn/module.h>

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

int64_t count_parameters(Model& m) {
  int64_t n = 0;
  for (auto& [name, p] : m.named_parameters()) n += p.numel();
  return n;
}

}  // namespace hpctrain
