// One training/evaluation batch as the loader hands it out.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace hpctrain {

struct Batch {
  // The model's input: float32 [B, sample shape...] (images: [B,C,H,W]), normalized, on the
  // loader's device; token data: int64 input ids [B, T].
  at::Tensor images;
  // int64 [B] class labels, float32 [B, target shape...] regression targets, or (token data)
  // int64 next-token targets [B, T].
  at::Tensor labels;
  at::Tensor valid;  // bool [B]; false for the sampler's padding duplicates
  int64_t epoch = 0;
  int64_t index = 0;  // batch index within the epoch share
};

}  // namespace hpctrain
