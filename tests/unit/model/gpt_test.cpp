// The zoo's GPT: the size and names examples/gpt_reference.py has, the decay rule, logits of
// [B,t,V] for t up to the block size, and one-line errors for bad --model-config values.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "model/gpt.h"
#include "runtime/check.h"
#include "support/error_of.h"

using namespace hpctrain;
using hpctrain::testing::error_of;

namespace {
ModelSpec lm_spec(const std::string& config) {
  ModelSpec s;
  s.name = "gpt";
  s.vocab_size = 256;
  s.seq_len = 128;
  s.sample_shape = {128};
  s.num_classes = 256;
  s.model_config = config;
  return s;
}
}  // namespace

TEST(Gpt, SizeNamesDecayAndLogits) {
  ModelPtr m = make_gpt(gpt_options(lm_spec("n_layer=4,n_head=4,n_embd=128")));
  EXPECT_EQ(count_parameters(*m), 842496);  // = gpt_reference.py's GPT (wte counted once: tied head)
  auto params = m->named_parameters();
  EXPECT_EQ(params.front().first, "transformer.wte.weight");
  EXPECT_EQ(params[1].first, "transformer.wpe.weight");
  EXPECT_EQ(params[2].first, "transformer.h.0.ln_1.weight");
  EXPECT_EQ(params.back().first, "transformer.ln_f.bias");
  int decayed = 0;
  for (auto& [name, p] : params) decayed += m->decays(name, p) ? 1 : 0;
  EXPECT_EQ(decayed, 17);  // wte + 4 Linear weights x 4 layers; not wpe, biases, LayerNorms
  EXPECT_FALSE(m->decays("transformer.wpe.weight", params[1].second));
  EXPECT_NE(m->describe().find("5.74 MFLOPs per token"), std::string::npos) << m->describe();
  m->train(false);
  EXPECT_EQ(m->forward(at::zeros({2, 128}, at::kLong)).sizes(), (std::vector<int64_t>{2, 128, 256}));
  EXPECT_EQ(m->forward(at::zeros({1, 5}, at::kLong)).sizes(), (std::vector<int64_t>{1, 5, 256}));
  EXPECT_NE(error_of([&] { m->forward(at::zeros({1, 129}, at::kLong)); }).find("block size 128"), std::string::npos);
  EXPECT_NE(error_of([&] { m->forward(at::zeros({4}, at::kLong)); }).find("[4]"), std::string::npos);
  ModelPtr nb = make_gpt(gpt_options(lm_spec("n_layer=1,n_head=2,n_embd=16,bias=false")));
  for (auto& [name, p] : nb->named_parameters()) EXPECT_FALSE(name.ends_with(".bias")) << name;
}

TEST(Gpt, BadModelConfigIsOneLine) {
  EXPECT_NE(error_of([] { gpt_options(lm_spec("n_layers=2")); }).find("unknown key n_layers"), std::string::npos);
  EXPECT_NE(error_of([] { gpt_options(lm_spec("n_embd=30,n_head=4")); }).find("not divisible"), std::string::npos);
  EXPECT_NE(error_of([] { gpt_options(lm_spec("n_layer=0")); }).find("positive integer"), std::string::npos);
  EXPECT_NE(error_of([] { gpt_options(lm_spec("dropout=1.5")); }).find("[0, 1)"), std::string::npos);
  EXPECT_NE(error_of([] { gpt_options(lm_spec("n_layer")); }).find("not key=value"), std::string::npos);
  EXPECT_NE(error_of([] { gpt_options(lm_spec("n_layer=2,n_layer=3")); }).find("given twice"), std::string::npos);
  ModelSpec images;
  images.sample_shape = {1, 28, 28};
  images.num_classes = 10;
  EXPECT_NE(error_of([&] { gpt_options(images); }).find("needs token data"), std::string::npos);
}

// gpt's initial values depend only on the seed: built on the meta device and drawn one parameter
// at a time in named_parameters() order (what a --zero 3 set-up does), they equal the whole CPU
// build's bitwise; set_parameter installs a tensor that forward then uses.
TEST(Gpt, MetaBuildDrawsTheWholeBuildsValuesOneParameterAtATime) {
  const GptOptions o = gpt_options(lm_spec("n_layer=2,n_head=2,n_embd=16"));
  at::manual_seed(7);
  ModelPtr whole = make_gpt(o);
  at::manual_seed(7);
  ModelPtr meta = make_gpt(o, /*meta=*/true);
  auto wp = whole->named_parameters(), mp = meta->named_parameters();
  ASSERT_EQ(wp.size(), mp.size());
  for (size_t i = 0; i < mp.size(); ++i) {
    ASSERT_TRUE(mp[i].second.is_meta()) << mp[i].first;
    ASSERT_EQ(mp[i].first, wp[i].first);
    at::Tensor v = at::empty(mp[i].second.sizes());
    meta->init_parameter(mp[i].first, v);
    EXPECT_TRUE(at::equal(v, wp[i].second)) << mp[i].first;
    meta->set_parameter(mp[i].first, v.requires_grad_());
  }
  for (auto& [name, p] : meta->named_parameters()) EXPECT_TRUE(p.device().is_cpu()) << name;
  at::Tensor idx = at::randint(256, {2, 8}, at::kLong);
  EXPECT_TRUE(at::equal(meta->forward(idx), whole->forward(idx)));
  EXPECT_THROW(meta->set_parameter("transformer.h.9.ln_1.weight", at::zeros({16})), Error);
}
