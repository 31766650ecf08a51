// One-line device checks for the first step (instead of a stack trace from deep in LibTorch).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace hpctrain {

// Throws hpctrain::Error such as "labels are on cpu, model on cuda:0" for the first tensor
// that is not on `device`.
void check_devices(const std::vector<std::pair<std::string, at::Tensor>>& tensors, const c10::Device& device);

}  // namespace hpctrain
