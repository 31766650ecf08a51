// ModuleModel: a torch::nn::Module with a one-tensor forward behind the Model interface
// (names, train/eval mode and device moves come from the module), and count_parameters.
#include "model/model.h"

#include <torch/nn/module.h>

#include <map>

#include "runtime/check.h"

namespace hpctrain {

ModuleModel::ModuleModel(std::shared_ptr<torch::nn::Module> module, ForwardFn forward)
    : module_(std::move(module)), forward_(std::move(forward)) {}

namespace {
NamedTensors all_parameters(torch::nn::Module& m) {
  NamedTensors out;
  for (auto& item : m.named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  return out;
}
}  // namespace

void Model::init_parameter(const std::string& name, at::Tensor&) {
  throw Error("this model builds no meta parameters: init_parameter(" + name + ") is not implemented");
}
void Model::set_parameter(const std::string& name, const at::Tensor&) {
  throw Error("this model builds no meta parameters: set_parameter(" + name + ") is not implemented");
}

NamedTensors ModuleModel::named_parameters() { return split_tied(all_parameters(*module_)).unique; }

std::vector<std::pair<std::string, std::string>> ModuleModel::tied_names() {
  return split_tied(all_parameters(*module_)).aliases;
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

namespace {

// A Model whose own named_parameters() repeats a tensor, listing it once.
class UntiedModel final : public Model {
 public:
  explicit UntiedModel(ModelPtr inner) : inner_(std::move(inner)) {}
  at::Tensor forward(const at::Tensor& x) override { return inner_->forward(x); }
  NamedTensors named_parameters() override { return split_tied(inner_->named_parameters()).unique; }
  std::vector<std::pair<std::string, std::string>> tied_names() override {
    auto aliases = inner_->tied_names();
    for (auto& a : split_tied(inner_->named_parameters()).aliases) aliases.push_back(std::move(a));
    return aliases;
  }
  NamedTensors named_buffers() override { return inner_->named_buffers(); }
  void train(bool on) override { inner_->train(on); }
  bool is_training() const override { return inner_->is_training(); }
  void to(c10::Device device) override { inner_->to(device); }
  std::shared_ptr<torch::nn::Module> module() override { return inner_->module(); }
  std::string describe() override { return inner_->describe(); }
  double train_flops_per_token() override { return inner_->train_flops_per_token(); }
  bool decays(const std::string& name, const at::Tensor& p) override { return inner_->decays(name, p); }
  int64_t set_activation_checkpointing(bool on) override { return inner_->set_activation_checkpointing(on); }
  std::vector<ModelUnit> set_unit_runner(UnitRunner run) override { return inner_->set_unit_runner(std::move(run)); }
  void init_parameter(const std::string& name, at::Tensor& out) override { inner_->init_parameter(name, out); }
  void set_parameter(const std::string& name, const at::Tensor& v) override { inner_->set_parameter(name, v); }

 private:
  ModelPtr inner_;
};

}  // namespace

ModelPtr untie_names(ModelPtr m) {
  if (!m || split_tied(m->named_parameters()).aliases.empty()) return m;
  return std::make_shared<UntiedModel>(std::move(m));
}

NamedTensors state_dict_names(Model& m) {
  NamedTensors out = m.named_parameters();
  std::map<std::string, at::Tensor> by_name(out.begin(), out.end());
  for (const auto& [alias, name] : m.tied_names()) out.emplace_back(alias, by_name.at(name));
  for (auto& b : m.named_buffers()) out.push_back(std::move(b));
  return out;
}

int64_t count_parameters(Model& m) {
  int64_t n = 0;
  for (auto& [name, p] : m.named_parameters()) n += p.numel();
  return n;
}

}  // namespace hpctrain
