// shard_model: the inner model's units handed to an FsdpEngine, and a Model that brackets the
// inner forward with the engine's begin_forward/end_forward.
#include "model/sharded_model.h"

#include <ATen/ATen.h>

#include <map>
#include <set>

#include "runtime/check.h"

namespace hpctrain {
namespace {

class FsdpModel final : public Model {
 public:
  FsdpModel(ModelPtr inner, std::shared_ptr<FsdpEngine> engine) : inner_(std::move(inner)), engine_(std::move(engine)) {}
  at::Tensor forward(const at::Tensor& x) override {
    engine_->begin_forward();
    return engine_->end_forward(inner_->forward(x));
  }
  NamedTensors named_parameters() override { return inner_->named_parameters(); }
  NamedTensors named_buffers() override { return inner_->named_buffers(); }
  std::vector<std::pair<std::string, std::string>> tied_names() override { return inner_->tied_names(); }
  void train(bool on) override { inner_->train(on); }
  bool is_training() const override { return inner_->is_training(); }
  void to(c10::Device device) override {
    if (device.type() != c10::kCPU) throw Error("--zero 3: a sharded model stays on the CPU");
  }
  std::shared_ptr<torch::nn::Module> module() override { return inner_->module(); }
  std::string describe() override { return inner_->describe(); }
  double train_flops_per_token() override { return inner_->train_flops_per_token(); }
  bool decays(const std::string& name, const at::Tensor& p) override { return inner_->decays(name, p); }

 private:
  ModelPtr inner_;
  std::shared_ptr<FsdpEngine> engine_;
};

}  // namespace

ShardedModel shard_model(ModelPtr inner, Communicator& comm, FsdpOptions opts) {
  auto slot = std::make_shared<FsdpEngine*>(nullptr);
  std::vector<ModelUnit> units =
      inner->set_unit_runner([slot](size_t u, const std::function<at::Tensor(const at::Tensor&)>& fn,
                                    const at::Tensor& x) { return (*slot)->run_unit(u, fn, x); });
  std::map<std::string, at::Tensor> trained;
  NamedTensors order;
  bool meta = false;
  for (auto& [name, p] : inner->named_parameters())
    if (p.requires_grad()) {
      trained.emplace(name, p);
      order.emplace_back(name, p);
      meta = meta || p.is_meta();
    } else if (p.is_meta()) {
      throw CollectiveError("--zero 3: frozen parameter " + name + " is on the meta device (no values to keep whole)");
    }
  std::set<std::string> taken;
  std::vector<FsdpUnitSpec> specs;
  for (auto& u : units) {
    FsdpUnitSpec s{u.name, {}};
    for (auto& name : u.params) {
      auto it = trained.find(name);
      if (it == trained.end()) continue;  // frozen: stays whole
      if (!taken.insert(name).second)
        throw CollectiveError("--zero 3: parameter " + name + " is in two units (" + u.name + " and another)");
      s.params.emplace_back(name, it->second);
    }
    specs.push_back(std::move(s));
  }
  FsdpUnitSpec root{"(root)", {}};
  for (auto& [name, p] : order)
    if (!taken.count(name)) root.params.emplace_back(name, p);
  std::vector<std::vector<std::string>> unit_names;  // per unit, root last
  auto names_of = [](const FsdpUnitSpec& s) {
    std::vector<std::string> v;
    for (auto& [name, p] : s.params) v.push_back(name);
    return v;
  };
  for (auto& s : specs) unit_names.push_back(names_of(s));
  unit_names.push_back(names_of(root));
  auto engine = std::make_shared<FsdpEngine>(std::move(specs), std::move(root), comm, opts);
  if (meta) {  // built without memory: each parameter gets the engine's CPU view, then its values
    for (size_t u = 0; u < unit_names.size(); ++u) {
      std::vector<at::Tensor> params = engine->unit_params(u);
      for (size_t k = 0; k < params.size(); ++k) inner->set_parameter(unit_names[u][k], params[k]);
    }
    std::vector<std::string> names;
    for (auto& [name, p] : order) names.push_back(name);
    engine->init_shards(names, [&inner](const std::string& name, at::Tensor& out) { inner->init_parameter(name, out); });
  }
  *slot = engine.get();
  ShardedModel out;
  out.units = static_cast<int64_t>(units.size());
  out.engine = engine;
  out.model = std::make_shared<FsdpModel>(std::move(inner), engine);
  return out;
}

}  // namespace hpctrain
