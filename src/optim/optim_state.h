// A replicated torch::optim optimizer's state <-> a checkpoint's optim/ tensors.
//
// Contract:
// - append_optimizer_state: optim/<param name>.<slot> for every parameter that has state, in the
//   model's parameter order (SGD momentum_buffer; AdamW exp_avg, exp_avg_sq, max_exp_avg_sq when
//   amsgrad, step). Tensors are aliases of the optimizer's, not copies.
// - restore_optimizer_state: the inverse; parameters without saved slots keep no state (a fresh
//   optimizer's first step creates it). Sharded (ZeRO) state: ckpt/zero_state.h first turns it
//   into this per-parameter layout.
#pragma once

#include <torch/optim/optimizer.h>

#include "ckpt/checkpoint.h"
#include "model/model.h"

namespace hpctrain {

void append_optimizer_state(CheckpointState& st, Model& model, torch::optim::Optimizer& opt);
void restore_optimizer_state(const CheckpointState& st, Model& model, torch::optim::Optimizer& opt);

}  // namespace hpctrain
