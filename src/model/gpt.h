// `--model gpt`: a GPT-2-style decoder-only transformer language model for token data.
//
// Contract:
// - Layout (GPT-2, as nanoGPT writes it): token embedding wte [V,E] plus learned position
//   embedding wpe [T,E] (T = --seq-len, the block size); n_layer pre-LayerNorm blocks
//   x + attn(ln_1(x)), x + mlp(ln_2(x)) with causal self-attention through
//   at::scaled_dot_product_attention(is_causal) (c_attn [3E,E] -> q,k,v; c_proj [E,E]) and a 4x
//   GELU (exact) MLP (c_fc [4E,E], c_proj [E,4E]); a final LayerNorm ln_f; the LM head is tied to
//   wte (logits = x wte^T), so it is no separate parameter: state_dict names are
//   transformer.wte.weight, transformer.wpe.weight, transformer.h.<i>.{ln_1,attn.c_attn,
//   attn.c_proj,ln_2,mlp.c_fc,mlp.c_proj}.{weight,bias}, transformer.ln_f.{weight,bias}
//   (examples/gpt_reference.py is the same module in PyTorch).
// - Init (GPT-2): Linear and embedding weights N(0, 0.02), residual projections (attn.c_proj,
//   mlp.c_proj) N(0, 0.02/sqrt(2 n_layer)), biases 0, LayerNorm weight 1; construction draws
//   nothing else, so the values depend only on the seed, and drawing them one parameter at a time
//   in named_parameters() order (Model::init_parameter) gives the same values.
// - make_gpt(o, meta = true) builds the parameters on the meta device (no memory; what a --zero 3
//   set-up asks for, ModelSpec::meta_parameters): Model::init_parameter and set_parameter give
//   them values and CPU memory later, one at a time.
// - forward(idx int64 [B,t], t <= T) -> logits [B,t,V]; t > T is a CollectiveError (generation
//   slides its context, eval/generate.h).
// - --model-config keys: n_layer (4), n_head (4), n_embd (128), dropout (0), bias (true); an
//   unknown key, a bad value or n_embd not divisible by n_head is a CollectiveError in one line.
// - Activation checkpointing (Model::set_activation_checkpointing): the units are the n_layer
//   blocks; each keeps only its input and is recomputed in backward (model/checkpoint_unit.h),
//   same dropout masks. Embeddings, ln_f and the head run as usual.
// - Weight decay (Model::decays): the matrices (wte and every Linear weight), not biases,
//   LayerNorm weights or the position table wpe.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/model.h"

namespace hpctrain {

struct GptOptions {
  int64_t vocab_size = 0, block_size = 0;
  int64_t n_layer = 4, n_head = 4, n_embd = 128;
  double dropout = 0;
  bool bias = true;
};

// The options of a spec (vocab from the data, block size = seq_len, the rest --model-config).
GptOptions gpt_options(const ModelSpec& spec);
ModelPtr make_gpt(const GptOptions& o, bool meta = false);
// The trained parameters of make_gpt(o), name and element count, in the model's order, computed
// from `o` alone (nothing allocated): what `hpctrain plan` sizes (model/gpt_shapes.cpp).
std::vector<std::pair<std::string, int64_t>> gpt_parameter_numels(const GptOptions& o);

}  // namespace hpctrain
