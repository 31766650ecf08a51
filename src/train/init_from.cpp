// --init-from: the Hugging Face config.json against --model-config (through gpt_options, the
// one parser of gpt's keys), the resume-wins decision, and the strict first-mismatch check
// before load_model_state copies the tensors.
#include "train/init_from.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "ckpt/checkpoint.h"
#include "ckpt/dir_ops.h"
#include "ckpt/formats/hf_gpt2.h"
#include "model/gpt.h"
#include "runtime/check.h"
#include "runtime/named_tensors.h"
#include "runtime/tensor_text.h"

namespace hpctrain {
namespace {

std::string label(const TrainConfig& cfg) { return "--init-from " + cfg.init_from; }

// Reads the config.json of a Hugging Face directory; its errors as one line naming --init-from.
ckpt::HfGpt2Config hf_config(const TrainConfig& cfg) {
  try {
    return ckpt::read_hf_gpt2_config(cfg.init_from);
  } catch (const Error& e) {
    throw CollectiveError(label(cfg) + ": " + printable(e.what()));
  }
}

// Whether --resume will restore a checkpoint (which then wins over --init-from).
bool resume_wins(const TrainConfig& cfg) {
  if (cfg.resume == "none") return false;
  if (cfg.resume != "auto") return true;
  return !cfg.ckpt_dir.empty() && !ckpt::complete_checkpoints(cfg.ckpt_dir).empty();
}

std::string hint(const std::string& name) {
  if (name == "transformer.wpe.weight") return " (the position table [--seq-len, n_embd])";
  if (name == "transformer.wte.weight") return " (the token table [the data's vocab_size, n_embd])";
  return "";
}

}  // namespace

std::string init_model_config(const TrainConfig& cfg) {
  if (cfg.init_from.empty() || !ckpt::is_hf_dir(cfg.init_from)) return cfg.model_config;
  if (cfg.model != "gpt")
    throw CollectiveError(label(cfg) + " is a Hugging Face model directory, which initialises --model gpt, not --model " +
                          cfg.model);
  const ckpt::HfGpt2Config hf = hf_config(cfg);
  if (cfg.seq_len != hf.n_positions)
    throw CollectiveError(label(cfg) + ": its config.json has n_positions " + std::to_string(hf.n_positions) +
                          " but --seq-len is " + std::to_string(cfg.seq_len) + "; they must be equal");
  if (cfg.model_config.empty()) return ckpt::hf_gpt2_model_config(hf);
  ModelSpec spec;
  spec.vocab_size = hf.vocab_size;
  spec.seq_len = hf.n_positions;
  spec.model_config = cfg.model_config;
  const GptOptions o = gpt_options(spec);
  const std::pair<const char*, std::pair<int64_t, int64_t>> keys[] = {
      {"n_layer", {hf.n_layer, o.n_layer}}, {"n_head", {hf.n_head, o.n_head}}, {"n_embd", {hf.n_embd, o.n_embd}}};
  for (const auto& [key, v] : keys)
    if (v.first != v.second)
      throw CollectiveError(label(cfg) + ": its config.json has " + key + " " + std::to_string(v.first) +
                            " but --model-config says " + key + "=" + std::to_string(v.second));
  if (!o.bias)
    throw CollectiveError(label(cfg) + ": a Hugging Face GPT-2 has biases, but --model-config says bias=false");
  return cfg.model_config;
}

void init_model_weights(const TrainConfig& cfg, Model& model, c10::Device device, bool rank0) {
  if (cfg.init_from.empty()) return;
  if (resume_wins(cfg)) {
    if (rank0)
      std::printf("hpctrain train: --init-from %s not used: --resume %s finds a checkpoint%s, which wins (its "
                  "weights, optimizer state and step)\n",
                  cfg.init_from.c_str(), cfg.resume.c_str(),
                  cfg.resume == "auto" ? (" in " + cfg.ckpt_dir).c_str() : "");
    return;
  }
  const bool hf = ckpt::is_hf_dir(cfg.init_from);
  CheckpointState st;
  try {
    st = read_checkpoint(cfg.init_from, device);
  } catch (const Error& e) {
    throw CollectiveError(label(cfg) + ": " + e.what());
  }
  const std::string saved_model = st.meta.value("model", std::string());
  if (!saved_model.empty() && saved_model != cfg.model && !saved_model.ends_with(".pt") && !cfg.model.ends_with(".pt"))
    throw CollectiveError(label(cfg) + " holds model " + saved_model + ", not --model " + cfg.model);
  std::map<std::string, at::Tensor> saved;
  for (const auto& [name, t] : st.tensors)
    if (name.starts_with("model/")) saved.emplace(name.substr(6), t);
  const NamedTensors all = state_dict_names(model);
  const TiedSplit tied = split_tied(all);
  for (const auto& [name, t] : tied.unique) {
    auto it = saved.find(name);
    if (it == saved.end())
      throw CollectiveError(label(cfg) + " has no tensor " + name + " (the first of model " + cfg.model +
                            "'s tensors it lacks)");
    if (it->second.sizes() != t.sizes())
      throw CollectiveError(label(cfg) + ": tensor " + name + " has shape " + shape_string(it->second.sizes()) +
                            " there, the model has " + shape_string(t.sizes()) + hint(name));
  }
  for (const auto& [name, t] : saved)
    if (std::none_of(all.begin(), all.end(), [&](const auto& nt) { return nt.first == name; }))
      throw CollectiveError(label(cfg) + ": tensor " + printable(name) + " is not part of model " + cfg.model);
  try {
    load_model_state(st, all, label(cfg));  // tied names, dtype and device conversion
  } catch (const Error& e) {
    throw CollectiveError(e.what());
  }
  if (rank0)
    std::printf("hpctrain train: initialised %zu tensors from %s (%s); optimizer, step and sampler start fresh "
                "(fine-tuning; --resume continues a run)\n",
                tied.unique.size(), cfg.init_from.c_str(), hf ? "Hugging Face GPT-2" : "checkpoint");
}

}  // namespace hpctrain
