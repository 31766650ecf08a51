// A plugin model with units (tests/e2e/test_activation_checkpointing.sh): how a --model-lib model
// opts in to --activation-checkpointing. `residual_mlp`: flatten, a linear stem, three residual
// units x + fc2(dropout(relu(fc1(x)))) (dropout 0.2), a linear head. It implements
// Model::set_activation_checkpointing by running each unit through hpctrain::checkpoint_unit
// with the unit's parameters (model/checkpoint_unit.h), and Model::set_unit_runner (--zero 3,
// tests/e2e/test_zero3.sh) by running each unit through the runner. `rank_skip_mlp`: the same
// model whose rank 1 skips unit 1 (data-dependent control flow gone wrong): --zero 3 must refuse
// it in one line naming the unit.
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>

#include <mpi.h>

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
    int rank = 0;
    if (skip_on_rank1 && runner) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_t i = 0;
    for (const auto& m : *units) {
      ResidualUnitImpl* u = m->as<ResidualUnit>();
      auto fn = [this, u](const at::Tensor& in) {
        return checkpoint ? hpctrain::checkpoint_unit([u](const at::Tensor& z) { return u->forward(z); }, in,
                                                      u->parameters())
                          : u->forward(in);
      };
      if (rank == 1 && i == 1) {
        ++i;
        continue;
      }
      h = runner ? runner(i, fn, h) : fn(h);
      ++i;
    }
    return head->forward(h);
  }
  hpctrain::UnitRunner runner;
  bool skip_on_rank1 = false;
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
  std::vector<hpctrain::ModelUnit> set_unit_runner(hpctrain::UnitRunner run) override {
    net_->runner = std::move(run);
    std::vector<hpctrain::ModelUnit> out;
    for (size_t i = 0; i < net_->units->size(); ++i) {
      hpctrain::ModelUnit u{"units." + std::to_string(i), {}};
      for (auto& [name, p] : named_parameters())
        if (name.rfind(u.name + ".", 0) == 0) u.params.push_back(name);
      out.push_back(std::move(u));
    }
    return out;
  }

 private:
  ResidualMlpImpl* net_;
};

hpctrain::ModelPtr residual_mlp(const hpctrain::ModelSpec& s) {
  int64_t in = 1;
  for (int64_t d : s.sample_shape) in *= d;
  return std::make_shared<ResidualMlpModel>(ResidualMlp(in, s.num_classes));
}

hpctrain::ModelPtr rank_skip_mlp(const hpctrain::ModelSpec& s) {
  int64_t in = 1;
  for (int64_t d : s.sample_shape) in *= d;
  ResidualMlp net(in, s.num_classes);
  net->skip_on_rank1 = true;
  return std::make_shared<ResidualMlpModel>(net);
}

}  // namespace

HPCTRAIN_REGISTER_MODEL("residual_mlp", "three residual units, each checkpointable (--activation-checkpointing)",
                        residual_mlp);
HPCTRAIN_REGISTER_MODEL("rank_skip_mlp", "residual_mlp whose rank 1 skips unit 1 under --zero 3 (a refused model)",
                        rank_skip_mlp);
