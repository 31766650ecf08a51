// Tied weights: a module that registers one tensor under two names lists it once
// (ModuleModel, untie_names for a Model of its own), names the other as an alias, counts it once,
// and loads a state that has either name or both (equal), refusing two different values.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "ckpt/checkpoint.h"
#include "model/model.h"
#include "runtime/check.h"
#include "support/error_of.h"

using namespace hpctrain;
using hpctrain::testing::error_of;

namespace {

struct TiedNet : torch::nn::Module {
  TiedNet() {
    wte = register_module("wte", torch::nn::Embedding(10, 4));
    fc = register_module("fc", torch::nn::Linear(4, 4));
    head = register_module("head", std::make_shared<torch::nn::Module>());
    head->register_parameter("weight", wte->weight);
  }
  torch::nn::Embedding wte{nullptr};
  torch::nn::Linear fc{nullptr};
  std::shared_ptr<torch::nn::Module> head;
};

// A plugin's own Model that lists the module's parameters as they are, the tied one twice.
class Listing : public Model {
 public:
  explicit Listing(std::shared_ptr<TiedNet> n) : n_(std::move(n)) {}
  at::Tensor forward(const at::Tensor& x) override { return x; }
  NamedTensors named_parameters() override {
    NamedTensors out;
    for (auto& item : n_->named_parameters(true)) out.emplace_back(item.key(), item.value());
    return out;
  }
  NamedTensors named_buffers() override { return {}; }
  void train(bool) override {}
  bool is_training() const override { return true; }
  void to(c10::Device) override {}

 private:
  std::shared_ptr<TiedNet> n_;
};

std::vector<std::string> names(const NamedTensors& v) {
  std::vector<std::string> out;
  for (auto& [n, t] : v) out.push_back(n);
  return out;
}

CheckpointState state_of(const NamedTensors& v) {
  CheckpointState st;
  for (auto& [n, t] : v) st.tensors.emplace_back("model/" + n, t.detach().clone());
  return st;
}

}  // namespace

TEST(Tied, SplitListsEachTensorOnceUnderItsFirstName) {
  at::Tensor a = at::ones({2}), b = at::zeros({3});
  TiedSplit s = split_tied({{"a", a}, {"b", b}, {"head", a}});
  EXPECT_EQ(names(s.unique), (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(s.aliases.size(), 1u);
  EXPECT_EQ(s.aliases[0], (std::pair<std::string, std::string>{"head", "a"}));
  // Equal values in different tensors are not tied.
  EXPECT_TRUE(split_tied({{"a", a}, {"c", a.clone()}}).aliases.empty());
}

TEST(Tied, ModuleModelAndOwnModelListTheSharedTensorOnce) {
  auto net = std::make_shared<TiedNet>();
  ASSERT_EQ(net->named_parameters(true).size(), 4u);  // LibTorch lists both names
  ModelPtr m = std::make_shared<ModuleModel>(net, [](const at::Tensor& x) { return x; });
  EXPECT_EQ(names(m->named_parameters()), (std::vector<std::string>{"wte.weight", "fc.weight", "fc.bias"}));
  EXPECT_EQ(count_parameters(*m), 10 * 4 + 16 + 4);
  ASSERT_EQ(m->tied_names().size(), 1u);
  EXPECT_EQ(m->tied_names()[0].first, "head.weight");
  EXPECT_EQ(names(state_dict_names(*m)), (std::vector<std::string>{"wte.weight", "fc.weight", "fc.bias", "head.weight"}));

  ModelPtr own = std::make_shared<Listing>(net);
  EXPECT_EQ(own->named_parameters().size(), 4u);
  ModelPtr wrapped = untie_names(own);
  EXPECT_NE(wrapped.get(), own.get());
  EXPECT_EQ(names(wrapped->named_parameters()), names(m->named_parameters()));
  EXPECT_EQ(wrapped->tied_names(), m->tied_names());
  EXPECT_EQ(untie_names(m).get(), m.get());  // already lists each tensor once: itself
}

TEST(Tied, LoadTakesEitherNameOrBothEqualAndRefusesDifferentValues) {
  auto src = std::make_shared<TiedNet>();
  ModelPtr from = std::make_shared<ModuleModel>(src, [](const at::Tensor& x) { return x; });
  auto dst_net = std::make_shared<TiedNet>();
  ModelPtr to = std::make_shared<ModuleModel>(dst_net, [](const at::Tensor& x) { return x; });
  // hpctrain's own checkpoints: the first name only.
  load_model_state(state_of(from->named_parameters()), state_dict_names(*to), "ckpt");
  EXPECT_TRUE(at::equal(dst_net->head->named_parameters(false)["weight"], src->wte->weight));
  EXPECT_EQ(dst_net->head->named_parameters(false)["weight"].unsafeGetTensorImpl(),
            dst_net->wte->weight.unsafeGetTensorImpl());  // still one tensor
  // A merged file or a PyTorch state_dict: every name.
  load_model_state(state_of(state_dict_names(*from)), state_dict_names(*to), "merged");
  // Only the other name (a state_dict that kept the head's name).
  NamedTensors head_only;
  for (auto& [n, t] : state_dict_names(*from))
    if (n != "wte.weight") head_only.emplace_back(n, t);
  load_model_state(state_of(head_only), state_dict_names(*to), "head only");
  EXPECT_TRUE(at::equal(dst_net->wte->weight, src->wte->weight));
  // Two different values under the two names of one tensor.
  CheckpointState bad = state_of(state_dict_names(*from));
  for (auto& [n, t] : bad.tensors)
    if (n == "model/head.weight") t = t + 1;
  std::string e = error_of([&] { load_model_state(bad, state_dict_names(*to), "bad"); });
  EXPECT_NE(e.find("tied parameters"), std::string::npos) << e;
  EXPECT_NE(e.find("head.weight vs wte.weight"), std::string::npos) << e;
}
