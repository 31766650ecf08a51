// A model plugin for tests/e2e/test_flight.sh: an MLP whose forward throws on rank 1 (from
// OMPI_COMM_WORLD_RANK) at its 12th call in training mode, mid-run, so that the rank fails alone
// with an error the trainer does not expect (a fatal error: the flight recorder dumps, then the
// job is aborted).
#include <ATen/ATen.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <cstdlib>
#include <string>

#include "model/model_registry.h"
#include "runtime/check.h"

namespace nn = torch::nn;

namespace {

class FailsMidRun : public hpctrain::Model {
 public:
  explicit FailsMidRun(const hpctrain::ModelSpec& s) : net_(nn::Flatten(), nn::Linear(in_features(s), s.num_classes)) {
    const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
    fails_ = r && std::string(r) == "1";
  }
  at::Tensor forward(const at::Tensor& x) override {
    if (fails_ && net_->is_training() && ++calls_ == 12)
      throw hpctrain::Error("flight_faults: injected failure in training forward 12");
    return net_->forward(x);
  }
  hpctrain::NamedTensors named_parameters() override {
    hpctrain::NamedTensors out;
    for (const auto& p : net_->named_parameters()) out.emplace_back(p.key(), p.value());
    return out;
  }
  hpctrain::NamedTensors named_buffers() override { return {}; }
  void train(bool on) override { net_->train(on); }
  bool is_training() const override { return net_->is_training(); }
  void to(c10::Device d) override { net_->to(d); }

 private:
  static int64_t in_features(const hpctrain::ModelSpec& s) {
    int64_t n = 1;
    for (int64_t d : s.sample_shape) n *= d;
    return n;
  }
  nn::Sequential net_;
  bool fails_ = false;
  int calls_ = 0;
};

}  // namespace

HPCTRAIN_REGISTER_MODEL("fails_mid_run", "an MLP that throws on rank 1 at its 12th training forward",
                        [](const hpctrain::ModelSpec& s) { return std::make_shared<FailsMidRun>(s); });
