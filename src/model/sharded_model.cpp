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
  for (auto& [name, p] : inner->named_parameters())
    if (p.requires_grad()) {
      trained.emplace(name, p);
      order.emplace_back(name, p);
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
  auto engine = std::make_shared<FsdpEngine>(std::move(specs), std::move(root), comm, opts);
  *slot = engine.get();
  ShardedModel out;
  out.units = static_cast<int64_t>(units.size());
  out.engine = engine;
  out.model = std::make_shared<FsdpModel>(std::move(inner), engine);
  return out;
}

}  // namespace hpctrain
