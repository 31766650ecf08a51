// The model a checkpoint was trained with, rebuilt from the checkpoint alone: for `hpctrain eval`
// (eval/eval_checkpoint.h) and `hpctrain generate` (eval/generate.h).
//
// Contract:
// - checkpoint_model_factory(): `model` when not empty (a zoo or plugin name, or a TorchScript
//   file); else the one the checkpoint names: the zoo, a plugin from `model_lib`, or the
//   TorchScript module stored in the checkpoint itself. A plugin that is not loaded, a merged
//   file of a TorchScript model (weights only) and a program's own factory are CollectiveErrors
//   naming what to pass.
// - checkpoint_model_spec(): the spec the model was built with (data shape, classes, and for a
//   language model vocab_size, seq_len and --model-config), from the checkpoint's metadata.
#pragma once

#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "model/model.h"

namespace hpctrain {

ModelFactory checkpoint_model_factory(const CheckpointState& st, const std::string& label, const std::string& model,
                                      const std::vector<std::string>& model_lib);

ModelSpec checkpoint_model_spec(const CheckpointState& st, const std::string& label);

}  // namespace hpctrain
