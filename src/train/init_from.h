// `hpctrain train --init-from PATH`: fine-tuning from weights (not a resume: the optimizer,
// the step and the sampler start fresh). PATH is anything read_checkpoint reads (a merged
// .h5/.pt/.safetensors, a step directory) or a Hugging Face GPT-2 directory (config.json +
// model.safetensors, ckpt/formats/hf_gpt2.h) for `--model gpt`.
//
// Contract (both collective in effect: every rank reads the same files and reaches the same
// verdict; errors are one-line CollectiveErrors naming PATH, raised before the trainer writes
// anything, so the run exits 2 with nothing written):
// - init_model_config(cfg): the --model-config to build the model with. cfg's own, except for a
//   Hugging Face directory: with no --model-config its config.json supplies n_layer, n_head,
//   n_embd; a given one must agree with it (the first differing key named), and so must
//   --model gpt and --seq-len (= n_positions). Another architecture (model_type) is refused.
// - init_model_weights(cfg, model, device, rank0): nothing without --init-from, or when
//   --resume will resume (--resume PATH, or auto with a complete checkpoint in --ckpt-dir:
//   the checkpoint wins; rank 0 prints one line saying so). Otherwise every tensor of the
//   model's state is taken from PATH, matched strictly by name: the first missing tensor,
//   shape mismatch or tensor the model lacks is named in one line; a file that records
//   another model name is refused. Rank 0 prints one line naming what was loaded.
#pragma once

#include <c10/core/Device.h>

#include <string>

#include "model/model.h"
#include "train/config.h"

namespace hpctrain {

std::string init_model_config(const TrainConfig& cfg);

void init_model_weights(const TrainConfig& cfg, Model& model, c10::Device device, bool rank0);

}  // namespace hpctrain
