// ckpt/formats/hf_gpt2.h: config.json both ways (every GPT-2 variant our model cannot compute is
// refused in one line naming the key) and a directory read back in our layout (Conv1D weights
// transposed, the head checked against wte, older files' names and mask buffers).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ckpt/formats/hf_gpt2.h"
#include "ckpt/formats/safetensors.h"
#include "support/ckpt_test_util.h"

using namespace hpctrain;
using namespace hpctrain::testing;
namespace fs = std::filesystem;

namespace {

ckpt::HfGpt2Config tiny() {
  ckpt::HfGpt2Config c;
  c.vocab_size = 11;
  c.n_positions = 6;
  c.n_embd = 8;
  c.n_layer = 2;
  c.n_head = 2;
  return c;
}

void write_config(const std::string& dir, const nlohmann::json& j) { std::ofstream(fs::path(dir) / "config.json") << j.dump(); }

// DIR with config.json for `c` and model.safetensors holding GPT-2's tensors (random), named
// with `prefix` stripped from "transformer." names, plus `extra`.
NamedTensors write_dir(const std::string& dir, const ckpt::HfGpt2Config& c, bool prefix = true,
                       NamedTensors extra = {}) {
  write_config(dir, ckpt::hf_gpt2_config_json(c, "float32"));
  NamedTensors hf;
  for (const auto& [name, shape] : ckpt::hf_gpt2_tensors(c))
    hf.emplace_back(prefix ? name : name.substr(12), at::randn(shape));
  for (auto& e : extra) hf.push_back(e);
  ckpt::write_merged_file(ckpt::open_safetensors, (fs::path(dir) / "model.safetensors").string(),
                          nlohmann::json::object(), hf);
  return hf;
}

}  // namespace

TEST(HfGpt2, ConfigRoundTripsAndNamesTheRun) {
  TempDir d;
  ckpt::HfGpt2Config c = tiny();
  write_config(d.path, ckpt::hf_gpt2_config_json(c, "float32"));
  ckpt::HfGpt2Config r = ckpt::read_hf_gpt2_config(d.path);
  EXPECT_EQ(std::make_tuple(r.vocab_size, r.n_positions, r.n_embd, r.n_layer, r.n_head),
            std::make_tuple(c.vocab_size, c.n_positions, c.n_embd, c.n_layer, c.n_head));
  EXPECT_EQ(ckpt::hf_gpt2_model_config(r), "n_layer=2,n_head=2,n_embd=8");
  EXPECT_EQ(ckpt::hf_gpt2_tensors(c).size(), 2u * 12 + 4);
  EXPECT_TRUE(ckpt::hf_gpt2_conv1d("transformer.h.1.mlp.c_proj.weight"));
  EXPECT_FALSE(ckpt::hf_gpt2_conv1d("transformer.h.1.mlp.c_proj.bias"));
}

TEST(HfGpt2, RefusesWhatOurGptDoesNotCompute) {
  const std::pair<nlohmann::json, std::string> cases[] = {
      {{{"model_type", "llama"}}, "model_type is \"llama\", not gpt2"},
      {{{"activation_function", nullptr}}, "activation_function is gelu_new"},  // transformers' default
      {{{"activation_function", "gelu_pytorch_tanh"}}, "activation_function is gelu_pytorch_tanh"},
      {{{"layer_norm_epsilon", 1e-6}}, "layer_norm_epsilon is"},
      {{{"n_inner", 64}}, "n_inner is 64, ours is 4 n_embd"},
      {{{"scale_attn_weights", false}}, "scale_attn_weights is false"},
      {{{"scale_attn_by_inverse_layer_idx", true}}, "scale_attn_by_inverse_layer_idx is true"},
      {{{"add_cross_attention", true}}, "add_cross_attention is true"},
      {{{"tie_word_embeddings", false}}, "tie_word_embeddings is false"},
      {{{"n_layer", nullptr}}, "has no n_layer"},
      {{{"n_embd", 9}}, "n_embd 9 is not divisible by n_head 2"},
  };
  for (const auto& [change, want] : cases) {
    SCOPED_TRACE(change.dump());
    TempDir d;
    nlohmann::json j = ckpt::hf_gpt2_config_json(tiny(), "float32");
    for (const auto& [k, v] : change.items())
      if (v.is_null())
        j.erase(k);
      else
        j[k] = v;
    write_config(d.path, j);
    std::string e = error_of([&] { ckpt::read_hf_gpt2_config(d.path); });
    EXPECT_NE(e.find(want), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST(HfGpt2, ReadsADirectoryInOurLayout) {
  for (bool prefix : {true, false}) {
    SCOPED_TRACE(prefix);
    TempDir d;
    ckpt::HfGpt2Config c = tiny();
    // Older files: no prefix, the causal-mask buffers, lm_head.weight beside wte.
    NamedTensors extra;
    if (!prefix) extra = {{"h.0.attn.bias", at::ones({1, 1, 6, 6})}, {"h.0.attn.masked_bias", at::tensor(-1e4)}};
    NamedTensors hf = write_dir(d.path, c, prefix, extra);
    CheckpointState st = ckpt::read_hf_gpt2_dir(d.path);
    EXPECT_EQ(st.meta["model"], "gpt");
    EXPECT_EQ(st.meta["seq_len"], 6);
    EXPECT_EQ(st.meta["vocab_size"], 11);
    ASSERT_EQ(st.tensors.size(), ckpt::hf_gpt2_tensors(c).size());
    for (size_t i = 0; i < st.tensors.size(); ++i) {
      const auto& [name, t] = st.tensors[i];
      const at::Tensor& want = hf[i].second;
      EXPECT_TRUE(at::equal(t, ckpt::hf_gpt2_conv1d(name) ? want.t() : want)) << name;
    }
    EXPECT_EQ(st.tensors[1].first, "model/transformer.h.0.attn.c_attn.weight");
    EXPECT_EQ(st.tensors[1].second.sizes(), (at::IntArrayRef{24, 8}));  // nn.Linear [3E, E]
  }
}

TEST(HfGpt2, RefusesAnUntiedHeadMissingTensorsAndShards) {
  ckpt::HfGpt2Config c = tiny();
  {
    TempDir d;
    write_dir(d.path, c, true, {{"lm_head.weight", at::randn({11, 8})}});
    EXPECT_NE(error_of([&] { ckpt::read_hf_gpt2_dir(d.path); }).find("lm_head.weight differs from transformer.wte.weight"),
              std::string::npos);
  }
  {
    TempDir d;
    write_dir(d.path, c, true, {{"score.weight", at::randn({2, 8})}});
    EXPECT_NE(error_of([&] { ckpt::read_hf_gpt2_dir(d.path); }).find("unexpected tensor transformer.score.weight"),
              std::string::npos);
  }
  {
    TempDir d;
    write_config(d.path, ckpt::hf_gpt2_config_json(c, "float32"));
    std::ofstream(fs::path(d.path) / "model.safetensors.index.json") << "{}";
    EXPECT_NE(error_of([&] { ckpt::read_hf_gpt2_dir(d.path); }).find("sharded weights"), std::string::npos);
  }
  {
    TempDir d;
    ckpt::HfGpt2Config more = c;
    more.n_layer = 3;
    write_dir(d.path, c);
    write_config(d.path, ckpt::hf_gpt2_config_json(more, "float32"));
    EXPECT_NE(error_of([&] { ckpt::read_hf_gpt2_dir(d.path); }).find("lacks tensor transformer.h.2.attn.c_attn.bias"),
              std::string::npos);
  }
}
