// A plugin model with units (tests/e2e/test_activation_checkpointing.sh): how a --model-lib model
// opts in to --activation-checkpointing. `residual_mlp`: flatten, a linear stem, three residual
// units x + fc2(dropout(relu(fc1(x)))) (dropout 0.2), a linear head. It implements
// Model::set_activation_checkpointing by running each unit through hpctrain::checkpoint_unit
// with the unit's parameters (model/checkpoint_unit.h).
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>

#include <memory>

#include "model/checkpoint_unit.h"
#include "model/model_registry.h"

namespace nn = torch::nn;

namespace {

struct ResidualUnitImpl : nn::Module {
  explicit ResidualUnitImpl(int64_t w) {
    fc1 = register_module("fc1", nn::Linear(w, 2 * w));
    fc2 = register_module("fc2", nn::Linear(2 * w, w));
  }
  at::Tensor forward(const at::Tensor& x) {
    return x + fc2->forward(at::dropout(at::relu(fc1->forward(x)), 0.2, is_training()));
  }
  nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(ResidualUnit);

struct ResidualMlpImpl : nn::Module {
  ResidualMlpImpl(int64_t in, int64_t classes) {
    stem = register_module("stem", nn::Linear(in, 64));
    units = register_module("units", nn::ModuleList());
    for (int i = 0; i < 3; ++i) units->push_back(ResidualUnit(64));
    head = register_module("head", nn::Linear(64, classes));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor h = stem->forward(x.flatten(1));
    for (const auto& m : *units) {
      ResidualUnitImpl* u = m->as<ResidualUnit>();
      h = checkpoint ? hpctrain::checkpoint_unit([u](const at::Tensor& in) { return u->forward(in); }, h,
                                                 u->parameters())
                     : u->forward(h);
    }
    return head->forward(h);
  }
  nn::Linear stem{nullptr}, head{nullptr};
  nn::ModuleList units{nullptr};
  bool checkpoint = false;
};
TORCH_MODULE(ResidualMlp);

class ResidualMlpModel final : public hpctrain::ModuleModel {
 public:
  explicit ResidualMlpModel(ResidualMlp net)
      : ModuleModel(net.ptr(), [raw = net.get()](const at::Tensor& x) { return raw->forward(x); }), net_(net.get()) {}
  int64_t set_activation_checkpointing(bool on) override {
    net_->checkpoint = on;
    return static_cast<int64_t>(net_->units->size());
  }

 private:
  ResidualMlpImpl* net_;
};

hpctrain::ModelPtr residual_mlp(const hpctrain::ModelSpec& s) {
  int64_t in = 1;
  for (int64_t d : s.sample_shape) in *= d;
  return std::make_shared<ResidualMlpModel>(ResidualMlp(in, s.num_classes));
}

}  // namespace

HPCTRAIN_REGISTER_MODEL("residual_mlp", "three residual units, each checkpointable (--activation-checkpointing)",
                        residual_mlp);
