// Internals of FsdpEngine shared by fsdp.cpp and fsdp_function.cpp (not installed API).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "ddp/fsdp.h"

namespace hpctrain {

struct FsdpEngine::Unit {
  std::string name;
  std::vector<std::string> names;
  std::vector<at::Tensor> params;  // views of `flat`
  std::vector<int64_t> offsets;
  int64_t numel = 0, padded = 0, block = 0;
  at::Tensor flat;   // the full flat buffer; its storage has 0 bytes while released
  at::Tensor shard;  // this rank's block: the fp32 master values
  at::Tensor grad;   // this rank's gradient block (sums over backward passes)
  bool gathered = false;
  WorkHandle work;  // an all-gather in flight
};

// Runs `fn` when the current backward pass ends (the autograd engine's final callbacks).
void queue_backward_callback(std::function<void()> fn);
}  // namespace hpctrain
