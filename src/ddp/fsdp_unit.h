// Internals of FsdpEngine shared by fsdp.cpp, fsdp_gather.cpp and fsdp_function.cpp (not installed API).
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
  std::vector<at::Tensor> params;  // views of `flat` (or of `vflat`, or of `master`)
  std::vector<int64_t> offsets;
  int64_t numel = 0, padded = 0, block = 0;
  at::Tensor flat;   // the full flat buffer (float32, or the gather dtype); 0 bytes while released
  at::Tensor shard;  // this rank's block: the fp32 master values
  at::Tensor grad;   // this rank's gradient block (sums over backward passes)
  bool gathered = false;
  WorkHandle work;  // an all-gather in flight
  // A unit gathered in FsdpOptions::param_dtype (bf16): `flat` has that dtype and its matrices
  // (two or more dimensions) are views of it; its vectors are float32 tensors over `vflat`,
  // filled from the gathered values (vector_of[k] >= 0: offset in vflat).
  bool lowp = false;
  std::vector<int64_t> vector_of;
  int64_t vnumel = 0;
  at::Tensor vflat;   // 0 bytes while released
  at::Tensor send;    // this rank's block in the gather dtype, alive while its all-gather is in flight
  at::Tensor master;  // materialize() of a lowp unit: the fp32 full buffer its parameters view
};

// Runs `fn` when the current backward pass ends (the autograd engine's final callbacks).
void queue_backward_callback(std::function<void()> fn);

// Storage helpers of the gather path (fsdp_gather.cpp).
void resize_storage(const at::Tensor& t, int64_t bytes);
// A tensor over `flat`'s current bytes that shares no version counter with it or its views:
// gathers write through it, so tensors saved for backward stay valid.
at::Tensor raw_alias(const at::Tensor& flat, int64_t numel);
// A flat buffer of n elements whose storage allocates through unpooled_allocator() (each gather
// maps the unit's bytes and each release unmaps them; glibc's heap kept released units' pages).
at::Tensor unpooled_flat(int64_t n, at::ScalarType dtype);
// Unit u's parameter k as the unit computes with it: a view of `flat` (float32 units, lowp
// matrices) or of `vflat` (lowp vectors).
at::Tensor compute_view(const FsdpEngine::Unit& u, size_t k);
}  // namespace hpctrain
