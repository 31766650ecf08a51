// NamedTensors: (dotted name, tensor) pairs in a fixed order, the currency between models, DDP
// and checkpoints. Names are a module's own state_dict names ("features.0.weight"), no prefix.
// split_tied: shared tensors (tied weights) listed once.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace hpctrain {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// A list that may name one tensor several times (a module's parameters with tied weights: the
// same TensorImpl registered under two names), as the unique tensors in first-seen order, each
// under its first name, and the other names: (alias, the first name).
struct TiedSplit {
  NamedTensors unique;
  std::vector<std::pair<std::string, std::string>> aliases;
};
TiedSplit split_tied(const NamedTensors& all);

}  // namespace hpctrain
