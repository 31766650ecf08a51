// The trainer's state <-> a checkpoint's named tensors and metadata.
//
// Contract:
// - capture(): model/<name> for every parameter and buffer (plain dotted names, no "module."
//   prefix), optim/<param name>.<slot> for optimizer state (SGD momentum_buffer; AdamW
//   exp_avg, exp_avg_sq, step), state/rng.cpu, and state/rng.cuda (the default CUDA generator of the model's
//   device) when the model is on a GPU; metadata: epoch,
//   step, sampler position (global samples consumed, so it survives a world-size change),
//   loss-scaler state, schedule, config, model name and data shape (so `hpctrain eval` can
//   rebuild the model from the checkpoint alone).
// - restore() is the inverse (state/rng.cuda only when both checkpoint and model have it: a
//   CPU checkpoint resumed on a GPU keeps the GPU's fresh generator, and the reverse); a checkpoint of another model is
//   an error listing missing keys, unexpected keys and shape mismatches (through load_model's rules).
#pragma once

#include <torch/optim/optimizer.h>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "dataset/sampler.h"
#include "model/model.h"
#include "optim/optim_state.h"

namespace hpctrain {

struct TrainProgress {
  int64_t step = 0;
  int64_t epoch = 0;
  SamplerPosition sampler;
  double scaler_scale = 65536.0;
  int64_t scaler_good = 0;
};

CheckpointState capture_train_state(Model& model, torch::optim::Optimizer& opt, const TrainProgress& progress,
                                    const nlohmann::json& extra_meta);

// Restores model, optimizer and RNG from `st`; returns the progress saved with it.
TrainProgress restore_train_state(const CheckpointState& st, Model& model, torch::optim::Optimizer& opt);

// The two halves of each, for optimizers that keep their state elsewhere (train_optimizer.h):
// model/, state/rng.* and the metadata; the optimizer's optim/ tensors are optim/optim_state.h.
// `copy_buffers`: the buffers are copies (for a snapshot taken later: the next forward updates
// BatchNorm's running statistics, ckpt Snapshot::kBeforeUpdate); parameters are always aliases.
CheckpointState capture_model_state(Model& model, const TrainProgress& progress, const nlohmann::json& extra_meta,
                                    bool copy_buffers = false);
TrainProgress restore_model_state(const CheckpointState& st, Model& model);

// Copies `model/` tensors of `st` into `model`; mismatches are one error listing them all.
void load_model_tensors(const CheckpointState& st, Model& model);

}  // namespace hpctrain
