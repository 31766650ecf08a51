// `hpctrain ckpt merge PATH --out DIR --format hf`: a `--model gpt` checkpoint as a Hugging Face
// GPT-2 directory (DIR/config.json + DIR/model.safetensors) that transformers'
// GPT2LMHeadModel.from_pretrained(DIR) loads with no missing or unexpected key. The mapping is
// ckpt/formats/hf_gpt2.h's; this part rebuilds the model's options from the checkpoint's
// metadata (gpt_options: the one parser of --model-config).
//
// Contract: PATH is a step directory, a checkpoint root or ROOT/latest; `cast` is "", "fp16" or
// "bf16". A checkpoint of another model (or one without token metadata) throws hpctrain::Error
// in one line before anything is created; the files appear whole or not at all. Returns the
// number of tensors written.
#pragma once

#include <cstddef>
#include <string>

namespace hpctrain {

size_t export_hf_gpt2(const std::string& path, const std::string& out_dir, const std::string& cast);

}  // namespace hpctrain
