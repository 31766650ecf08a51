// Hugging Face GPT-2 directories (`transformers`' GPT2LMHeadModel: DIR/config.json and
// DIR/model.safetensors) <-> `--model gpt` checkpoints, internal to src/ckpt (the trainer and
// the CLI reach it through read_checkpoint, train/init_from.h and eval/hf_export.h).
//
// Contract (the mapping, checked against transformers 5.23):
// - Names: ours are GPT-2's (transformer.wte.weight, transformer.h.<i>.attn.c_attn.weight, ...).
//   GPT-2's Conv1D stores weights [in, out], the transpose of our nn.Linear [out, in]: the
//   c_attn, c_proj (attention and MLP) and c_fc weights are transposed both ways; q, k, v are
//   the same thirds of c_attn in both. The head is tied to wte (no lm_head.weight written; one
//   read must equal wte).
// - config.json: n_positions = our block size (--seq-len), activation_function "gelu" (ours is
//   the exact erf GELU, not GPT-2's tanh "gelu_new"), layer_norm_epsilon 1e-5, n_inner null
//   (4 n_embd), attention scaled by 1/sqrt(head dim), *_pdrop = our dropout, bos/eos null (the
//   byte tokenizer has no end-of-text token).
// - `--model-config bias=false` has no GPT-2 equivalent with the same parameters; GPT-2 with
//   every bias zero computes the same function, so the export writes zero biases (reading such a
//   directory back gives a bias=true model whose biases are zero).
// - Reading refuses in one line (hpctrain::Error naming DIR): another model_type, a GPT-2
//   variant our model cannot compute (activation other than gelu, another epsilon or n_inner,
//   unscaled or layer-scaled attention, cross-attention, an untied head), a missing, misshapen
//   or unexpected tensor (the first one named), sharded weights.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/checkpoint.h"

namespace hpctrain::ckpt {

struct HfGpt2Config {
  int64_t vocab_size = 0, n_positions = 0, n_embd = 0, n_layer = 0, n_head = 0;
  bool bias = true;    // false: exported as zero biases (see above)
  double dropout = 0;  // attn_pdrop, resid_pdrop, embd_pdrop
};

// GPT-2's tensors for `c` in its own order and layout (Conv1D weights [in, out]).
std::vector<std::pair<std::string, std::vector<int64_t>>> hf_gpt2_tensors(const HfGpt2Config& c);
// True for the Conv1D weights (transposed between the two layouts).
bool hf_gpt2_conv1d(const std::string& name);

// config.json for `c`; dtype "float32", "float16" or "bfloat16".
nlohmann::ordered_json hf_gpt2_config_json(const HfGpt2Config& c, const std::string& dtype);
// The --model-config text of `c` ("n_layer=2,n_head=4,n_embd=32").
std::string hf_gpt2_model_config(const HfGpt2Config& c);

// True for a directory holding a config.json.
bool is_hf_dir(const std::string& path);
// DIR/config.json, validated as above (bias true, dropout 0: training settings stay ours).
HfGpt2Config read_hf_gpt2_config(const std::string& dir);
// The whole directory as a checkpoint of `--model gpt`: tensors "model/<name>" in our layout,
// meta {model: gpt, vocab_size, seq_len: n_positions, config: {model_config}} (as a merged
// file presents it). Reads model.safetensors, else pytorch_model.bin.
CheckpointState read_hf_gpt2_dir(const std::string& dir);

// Streams the model/ tensors of a verified step directory into OUT/model.safetensors (one
// tensor in memory at a time, written at its offset; `cast` "" keeps dtypes, "fp16"/"bf16"
// casts) and writes OUT/config.json. Every check (the checkpoint's tensors are exactly
// GPT-2's for `c`) happens before anything is created; both files are written as .tmp,
// fsynced and renamed; OUT is created when missing (its parent must exist) and removed again
// on failure. Returns the number of tensors written.
size_t write_hf_gpt2(const std::string& step_dir, const std::string& out_dir, const HfGpt2Config& c,
                     const std::string& cast);

}  // namespace hpctrain::ckpt
