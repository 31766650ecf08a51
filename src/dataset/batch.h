// One training/evaluation batch as the loader hands it out.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace hpctrain {

struct Batch {
  at::Tensor images;  // float32 [B, sample shape...] (images: [B,C,H,W]), normalized, on the loader's device
  at::Tensor labels;  // int64 [B] class labels, or float32 [B, target shape...] regression targets
  at::Tensor valid;   // bool [B]; false for the sampler's padding duplicates
  int64_t epoch = 0;
  int64_t index = 0;  // batch index within the epoch share
};

}  // namespace hpctrain
