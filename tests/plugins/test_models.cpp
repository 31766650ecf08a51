// Models for the bad-input battery's --model-lib cases (tests/e2e/bad_inputs.py): each one gets
// one thing wrong that the trainer must report in one line before any optimizer step. And
// `throws`, a model that fails mid-run the way a user's model can (tests/e2e/test_launch_no_restart.sh).
#include <ATen/ATen.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "model/model_registry.h"
#include "runtime/check.h"
#include "runtime/world.h"

namespace nn = torch::nn;

namespace {

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Three more outputs than the data has classes.
hpctrain::ModelPtr wrong_classes(const hpctrain::ModelSpec& s) {
  return hpctrain::module_model(nn::Sequential(nn::Flatten(), nn::Linear(numel_of(s.sample_shape), s.num_classes + 3)));
}

// A linear layer for inputs twice as large as the samples: fails inside forward.
hpctrain::ModelPtr wrong_input(const hpctrain::ModelSpec& s) {
  return hpctrain::module_model(nn::Sequential(nn::Flatten(), nn::Linear(2 * numel_of(s.sample_shape), s.num_classes)));
}

// Hidden width from the environment (a plugin built differently on one node).
hpctrain::ModelPtr env_width(const hpctrain::ModelSpec& s) {
  const char* w = std::getenv("TEST_PLUGIN_WIDTH");
  int64_t width = w ? std::atoll(w) : 16;
  return hpctrain::module_model(
      nn::Sequential(nn::Flatten(), nn::Linear(numel_of(s.sample_shape), width), nn::Linear(width, s.num_classes)));
}

// A model whose to() leaves one parameter behind on the meta device.
class StrayParameter : public hpctrain::Model {
 public:
  explicit StrayParameter(const hpctrain::ModelSpec& s)
      : fc_(nn::Linear(numel_of(s.sample_shape), s.num_classes)),
        stray_(at::empty({4}, at::TensorOptions().device(c10::kMeta)).requires_grad_()) {}
  at::Tensor forward(const at::Tensor& x) override { return fc_->forward(x.flatten(1)); }
  hpctrain::NamedTensors named_parameters() override {
    return {{"fc.weight", fc_->weight}, {"fc.bias", fc_->bias}, {"stray", stray_}};
  }
  hpctrain::NamedTensors named_buffers() override { return {}; }
  void train(bool on) override { fc_->train(on); }
  bool is_training() const override { return fc_->is_training(); }
  void to(c10::Device d) override { fc_->to(d); }

 private:
  nn::Linear fc_;
  at::Tensor stray_;
};

// A linear model whose Nth training forward throws. --model-config keys: at=N (default 5), rank=R
// (only rank R throws; default every rank), error=runtime|input|oom|diverged|comm:
// std::runtime_error (exit 1), hpctrain::InputError (2), std::bad_alloc (4),
// hpctrain::DivergedError (5), hpctrain::CommError (6, as a failed MPI call).
hpctrain::ModelPtr throws(const hpctrain::ModelSpec& s) {
  auto cfg = hpctrain::parse_model_config(s.model_config);
  auto get = [&](const char* k, const char* dflt) { return cfg.count(k) ? cfg.at(k) : std::string(dflt); };
  const long nth = std::stol(get("at", "5"));
  const int rank = std::stoi(get("rank", "-1"));
  const std::string error = get("error", "runtime");
  auto net = nn::Sequential(nn::Flatten(), nn::Linear(numel_of(s.sample_shape), s.num_classes)).ptr();
  auto calls = std::make_shared<long>(0);
  return std::make_shared<hpctrain::ModuleModel>(net, [net, calls, nth, rank, error](const at::Tensor& x) {
    if (net->is_training() && ++*calls == nth && (rank < 0 || hpctrain::World::get().rank() == rank)) {
      const std::string what = "throws: forward call " + std::to_string(nth) + " fails (error=" + error + ")";
      if (error == "input") throw hpctrain::InputError(what);
      if (error == "oom") throw std::bad_alloc();
      if (error == "diverged") throw hpctrain::DivergedError(what);
      if (error == "comm") throw hpctrain::CommError(what);
      throw std::runtime_error(what);
    }
    return net->forward(x);
  });
}

}  // namespace

HPCTRAIN_REGISTER_MODEL("wrong_classes", "outputs num_classes + 3 logits", wrong_classes);
HPCTRAIN_REGISTER_MODEL("wrong_input", "expects inputs twice the sample size", wrong_input);
HPCTRAIN_REGISTER_MODEL("env_width", "hidden width from TEST_PLUGIN_WIDTH", env_width);
HPCTRAIN_REGISTER_MODEL("stray_parameter", "leaves a parameter on the meta device",
                        [](const hpctrain::ModelSpec& s) { return std::make_shared<StrayParameter>(s); });
// Last: the battery matches the list of the models above in this order.
HPCTRAIN_REGISTER_MODEL("throws", "throws on its Nth training forward (--model-config at=N,rank=R,error=...)", throws);
