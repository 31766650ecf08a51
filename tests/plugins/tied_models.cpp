// A C++ module with tied weights for tests/e2e/test_tied_weights.sh: `tied_lm` registers its token
// embedding a second time as head.weight (one tensor, two names), as a user's C++ GPT ties its
// output head. Its Python twin (the same formula, the same closed-form start) is CppTwin in
// tests/e2e/tied_models.py; `tied_lm_own` is the same network behind a plugin's own Model class
// whose named_parameters() lists the shared tensor under both names; `aliased_lm` ties by a
// view (a second tensor over the same memory), which the trainer refuses.
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "model/model_registry.h"

namespace nn = torch::nn;

namespace {

struct TiedLmImpl : nn::Module {
  TiedLmImpl(int64_t vocab, int64_t d) {
    wte = register_module("wte", nn::Embedding(vocab, d));
    fc = register_module("fc", nn::Linear(d, d));
    head = register_module("head", std::make_shared<nn::Module>());
    head->register_parameter("weight", wte->weight);  // the same tensor under a second name
    at::NoGradGuard no_grad;
    auto i = [](int64_t n) { return at::arange(n, at::kDouble); };
    wte->weight.copy_((0.5 * at::sin(i(vocab * d) * 0.37)).view({vocab, d}).to(at::kFloat));
    fc->weight.copy_((0.3 * at::cos(i(d * d) * 0.11)).view({d, d}).to(at::kFloat));
    fc->bias.copy_((0.01 * i(d)).to(at::kFloat));
  }
  at::Tensor forward(const at::Tensor& idx) {
    at::Tensor x = wte->forward(idx);
    return at::linear(at::tanh(fc->forward(x)) + x, wte->weight);  // head.weight: the same tensor
  }
  nn::Embedding wte{nullptr};
  nn::Linear fc{nullptr};
  std::shared_ptr<nn::Module> head;
};
TORCH_MODULE(TiedLm);

constexpr int64_t kWidth = 16;

// A plugin's own Model: lists wte.weight, fc.weight, fc.bias, head.weight (the same tensor as wte.weight).
class OwnTiedModel final : public hpctrain::Model {
 public:
  explicit OwnTiedModel(int64_t vocab) : net_(vocab, kWidth) {}
  at::Tensor forward(const at::Tensor& x) override { return net_->forward(x); }
  hpctrain::NamedTensors named_parameters() override {
    hpctrain::NamedTensors out;
    for (auto& item : net_->named_parameters(true)) out.emplace_back(item.key(), item.value());
    return out;
  }
  hpctrain::NamedTensors named_buffers() override { return {}; }
  void train(bool on) override { net_->train(on); }
  bool is_training() const override { return net_->is_training(); }
  void to(c10::Device d) override { net_->to(d); }

 private:
  TiedLm net_;
};

// Tied the wrong way: head.weight is a second tensor (a view) over wte's memory, so it would get
// its own gradient and its own update of that memory. The trainer refuses it at start.
struct AliasedLmImpl : TiedLmImpl {
  AliasedLmImpl(int64_t vocab, int64_t d) : TiedLmImpl(vocab, d) {
    register_module("alias", std::make_shared<nn::Module>())->register_parameter("weight", wte->weight.view({vocab, d}));
  }
};

}  // namespace

HPCTRAIN_REGISTER_MODEL("aliased_lm", "tied_lm plus a second tensor over the embedding's memory (refused)",
                        [](const hpctrain::ModelSpec& s) {
                          auto net = std::make_shared<AliasedLmImpl>(s.vocab_size, kWidth);
                          return hpctrain::module_model(std::static_pointer_cast<TiedLmImpl>(net));
                        });
HPCTRAIN_REGISTER_MODEL("tied_lm", "token LM whose output head is its embedding (one tensor, two names)",
                        [](const hpctrain::ModelSpec& s) { return hpctrain::module_model(TiedLm(s.vocab_size, kWidth)); });
HPCTRAIN_REGISTER_MODEL("tied_lm_own", "tied_lm behind the plugin's own Model class (lists the tied tensor twice)",
                        [](const hpctrain::ModelSpec& s) { return std::make_shared<OwnTiedModel>(s.vocab_size); });
