// Hugging Face GPT-2: the tensor list, config.json both ways, and reading a directory as a
// `--model gpt` checkpoint (the streamed export is hf_gpt2_write.cpp).
#include "ckpt/formats/hf_gpt2.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "ckpt/formats/safetensors.h"
#include "ckpt/formats/state_dict_pt.h"
#include "runtime/check.h"
#include "runtime/tensor_text.h"

namespace fs = std::filesystem;

namespace hpctrain::ckpt {
namespace {

std::string dims(const std::vector<int64_t>& v) {
  std::string s;
  for (auto d : v) s += (s.empty() ? "" : ",") + std::to_string(d);
  return "[" + s + "]";
}

// A config.json value: `key` as an integer >= 1 (required).
int64_t positive(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) throw Error(where + " has no " + key);
  const auto& v = j[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 1)
    throw Error(where + ": " + key + " is " + printable(v.dump()) + ", expected a positive integer");
  return v.get<int64_t>();
}

// Refuses a setting of GPT-2 our model does not compute; `fine` says whether the value (or its
// transformers default, when absent) is ours.
void require(bool fine, const std::string& where, const std::string& what) {
  if (!fine) throw Error(where + ": " + what + "; --model gpt cannot compute that GPT-2 variant");
}

}  // namespace

std::vector<std::pair<std::string, std::vector<int64_t>>> hf_gpt2_tensors(const HfGpt2Config& c) {
  const int64_t e = c.n_embd;
  std::vector<std::pair<std::string, std::vector<int64_t>>> v;
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".";
    v.push_back({h + "attn.c_attn.bias", {3 * e}});
    v.push_back({h + "attn.c_attn.weight", {e, 3 * e}});
    v.push_back({h + "attn.c_proj.bias", {e}});
    v.push_back({h + "attn.c_proj.weight", {e, e}});
    v.push_back({h + "ln_1.bias", {e}});
    v.push_back({h + "ln_1.weight", {e}});
    v.push_back({h + "ln_2.bias", {e}});
    v.push_back({h + "ln_2.weight", {e}});
    v.push_back({h + "mlp.c_fc.bias", {4 * e}});
    v.push_back({h + "mlp.c_fc.weight", {e, 4 * e}});
    v.push_back({h + "mlp.c_proj.bias", {e}});
    v.push_back({h + "mlp.c_proj.weight", {4 * e, e}});
  }
  v.push_back({"transformer.ln_f.bias", {e}});
  v.push_back({"transformer.ln_f.weight", {e}});
  v.push_back({"transformer.wpe.weight", {c.n_positions, e}});
  v.push_back({"transformer.wte.weight", {c.vocab_size, e}});
  return v;
}

bool hf_gpt2_conv1d(const std::string& name) {
  for (const char* s : {".c_attn.weight", ".c_proj.weight", ".c_fc.weight"})
    if (name.ends_with(s)) return true;
  return false;
}

nlohmann::ordered_json hf_gpt2_config_json(const HfGpt2Config& c, const std::string& dtype) {
  nlohmann::ordered_json j;
  j["architectures"] = {"GPT2LMHeadModel"};
  j["model_type"] = "gpt2";
  j["vocab_size"] = c.vocab_size;
  j["n_positions"] = c.n_positions;
  j["n_embd"] = c.n_embd;
  j["n_layer"] = c.n_layer;
  j["n_head"] = c.n_head;
  j["n_inner"] = nullptr;
  j["activation_function"] = "gelu";
  j["layer_norm_epsilon"] = 1e-5;
  j["attn_pdrop"] = c.dropout;
  j["embd_pdrop"] = c.dropout;
  j["resid_pdrop"] = c.dropout;
  j["initializer_range"] = 0.02;
  j["scale_attn_weights"] = true;
  j["scale_attn_by_inverse_layer_idx"] = false;
  j["reorder_and_upcast_attn"] = false;
  j["add_cross_attention"] = false;
  j["tie_word_embeddings"] = true;
  j["bos_token_id"] = nullptr;
  j["eos_token_id"] = nullptr;
  j["use_cache"] = true;
  j["dtype"] = dtype;
  return j;
}

std::string hf_gpt2_model_config(const HfGpt2Config& c) {
  return "n_layer=" + std::to_string(c.n_layer) + ",n_head=" + std::to_string(c.n_head) +
         ",n_embd=" + std::to_string(c.n_embd);
}

bool is_hf_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "config.json", ec);
}

HfGpt2Config read_hf_gpt2_config(const std::string& dir) {
  const std::string where = (fs::path(dir) / "config.json").string();
  std::ifstream in(where);
  if (!in) throw Error("cannot read " + where);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(where + " is not a JSON object");
  const std::string type = j.value("model_type", std::string());
  if (type != "gpt2")
    throw Error(where + ": model_type is \"" + printable(type) +
                "\", not gpt2: only Hugging Face GPT-2 models map onto --model gpt");
  HfGpt2Config c;
  c.vocab_size = positive(j, "vocab_size", where);
  c.n_positions = positive(j, "n_positions", where);
  c.n_embd = positive(j, "n_embd", where);
  c.n_layer = positive(j, "n_layer", where);
  c.n_head = positive(j, "n_head", where);
  if (c.n_embd % c.n_head != 0)
    throw Error(where + ": n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " +
                std::to_string(c.n_head));
  // transformers' GPT2Config defaults for absent keys: gelu_new, 1e-5, n_inner 4E, scaled, tied.
  auto text = [&](const char* k, const char* def) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(def); };
  auto flag = [&](const char* k, bool def) { return j.contains(k) && j[k].is_boolean() ? j[k].get<bool>() : def; };
  const std::string act = text("activation_function", "gelu_new");
  require(act == "gelu", where,
          "activation_function is " + printable(act) + " (--model gpt uses the exact erf GELU, \"gelu\")");
  const double eps = j.contains("layer_norm_epsilon") && j["layer_norm_epsilon"].is_number()
                         ? j["layer_norm_epsilon"].get<double>()
                         : 1e-5;
  require(std::abs(eps - 1e-5) <= 1e-12, where, "layer_norm_epsilon is " + std::to_string(eps) + ", ours is 1e-05");
  const bool inner_ok = !j.contains("n_inner") || j["n_inner"].is_null() ||
                        (j["n_inner"].is_number_integer() && j["n_inner"].get<int64_t>() == 4 * c.n_embd);
  require(inner_ok, where, "n_inner is " + printable(j.value("n_inner", nlohmann::json()).dump()) + ", ours is 4 n_embd");
  require(flag("scale_attn_weights", true), where, "scale_attn_weights is false");
  require(!flag("scale_attn_by_inverse_layer_idx", false), where, "scale_attn_by_inverse_layer_idx is true");
  require(!flag("add_cross_attention", false), where, "add_cross_attention is true");
  require(flag("tie_word_embeddings", true), where, "tie_word_embeddings is false (our LM head is wte)");
  return c;
}

CheckpointState read_hf_gpt2_dir(const std::string& dir) {
  HfGpt2Config c = read_hf_gpt2_config(dir);
  const fs::path d(dir);
  CheckpointState raw;
  std::string file;
  if (fs::exists(d / "model.safetensors")) {
    file = (d / "model.safetensors").string();
    raw = read_safetensors(file);
  } else if (fs::exists(d / "pytorch_model.bin")) {
    file = (d / "pytorch_model.bin").string();
    raw = read_pt_file(file);
  } else if (fs::exists(d / "model.safetensors.index.json")) {
    throw Error(dir + ": sharded weights (model.safetensors.index.json) are not supported; save the model with "
                      "save_pretrained(DIR, max_shard_size=\"100GB\") for one model.safetensors");
  } else {
    throw Error(dir + " has config.json but no model.safetensors (or pytorch_model.bin)");
  }
  // GPT2LMHeadModel saves "transformer."-prefixed names, GPT2Model none; old files add the
  // attention-mask buffers attn.bias / attn.masked_bias, which are not weights.
  std::map<std::string, at::Tensor> by_name;
  at::Tensor head;
  for (auto& [prefixed, t] : raw.tensors) {
    std::string name = prefixed.substr(6);  // "model/"
    if (name == "lm_head.weight") {
      head = t;
      continue;
    }
    if (!name.starts_with("transformer.")) name = "transformer." + name;
    if (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias")) continue;
    by_name[name] = t;
  }
  const auto want = hf_gpt2_tensors(c);
  for (const auto& [name, shape] : want) {
    auto it = by_name.find(name);
    if (it == by_name.end())
      throw Error(file + " lacks tensor " + name + " (config.json: n_layer " + std::to_string(c.n_layer) + ")");
    if (it->second.sizes().vec() != shape)
      throw Error(file + ": tensor " + name + " has shape " + dims(it->second.sizes().vec()) + ", config.json implies " +
                  dims(shape));
  }
  if (by_name.size() != want.size())
    for (const auto& [name, t] : by_name)
      if (std::none_of(want.begin(), want.end(), [&](const auto& w) { return w.first == name; }))
        throw Error(file + ": unexpected tensor " + printable(name) + " (not part of GPT2LMHeadModel)");
  const at::Tensor& wte = by_name.at("transformer.wte.weight");
  if (head.defined() && !(head.sizes() == wte.sizes() && at::equal(head, wte.to(head.dtype()))))
    throw Error(file + ": lm_head.weight differs from transformer.wte.weight; --model gpt ties its head to wte");
  CheckpointState st;
  for (const auto& [name, shape] : want) {
    at::Tensor t = by_name.at(name);
    st.tensors.emplace_back("model/" + name, hf_gpt2_conv1d(name) ? t.t().contiguous() : t);
  }
  st.meta = {{"model", "gpt"},
             {"vocab_size", c.vocab_size},
             {"seq_len", c.n_positions},
             {"config", {{"model_config", hf_gpt2_model_config(c)}}},
             {"hf_dir", dir}};
  return st;
}

}  // namespace hpctrain::ckpt
