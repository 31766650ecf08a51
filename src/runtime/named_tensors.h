// NamedTensors: (dotted name, tensor) pairs in a fixed order, the currency between models, DDP
// and checkpoints. Names are a module's own state_dict names ("features.0.weight"), no prefix.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace hpctrain {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

}  // namespace hpctrain
