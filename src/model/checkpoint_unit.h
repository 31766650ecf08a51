// Activation checkpointing (--activation-checkpointing): run one unit of a model (a transformer
// block) without keeping its intermediate activations, and recompute it in backward.
// LibTorch C++ has no torch.utils.checkpoint; this is its counterpart, written as a custom
// autograd function.
//
// Contract of checkpoint_unit(unit, x, params):
// - `unit` is a pure function of `x` and of `params` (the unit's trainable parameters, each
//   listed once): same inputs, same RNG state, same autocast state -> same output. It must not
//   update buffers (BatchNorm's running statistics would be updated twice), run collectives or
//   read tensors that change between forward and backward. It may use a parameter several times.
// - When grad mode is off, or neither `x` nor any of `params` requires grad, it is plain
//   `unit(x)`. Otherwise forward runs `unit(x)` without autograd and keeps only `x`, the
//   default generators' states (CPU, and the device's when `x` is on CUDA) and the autocast
//   state (enabled, dtype) of CPU and CUDA; no intermediate activation of the unit is kept.
// - Backward restores those RNG and autocast states (then puts the generators back where they
//   were, so the run's random stream is the same as without checkpointing), recomputes the unit
//   with grad on a detached copy of `x`, and returns the gradients of `x` and of every one of
//   `params` as the node's outputs. The parameters' gradients therefore reach .grad through their
//   normal AccumulateGrad nodes, in the outer backward, once per parameter per backward even when
//   the parameter is used elsewhere too (DDP's hooks fire as without checkpointing; no_sync and
//   gradient accumulation are unchanged). A hook registered with Tensor::register_hook on a
//   parameter also sees the recompute's partial gradient (autograd::grad calls it); hooks on the
//   AccumulateGrad node, as DDP's are, see only the final one. Gradients equal the plain computation's up to
//   floating-point reassociation in the recompute (bitwise on one thread in practice).
// - The RNG replay assumes no other thread draws from the same default generator between the
//   unit's forward and its backward (the trainer's loader does not).
// - recompute_totals(): process-wide counts of units recomputed and the host seconds spent in
//   their recompute forwards (on CUDA: the time to queue the kernels), for the run's summary.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace hpctrain {

using UnitFn = std::function<at::Tensor(const at::Tensor&)>;

at::Tensor checkpoint_unit(UnitFn unit, const at::Tensor& x, const std::vector<at::Tensor>& params);

struct RecomputeTotals {
  int64_t units = 0;  // recompute forwards run
  double seconds = 0;
};
RecomputeTotals recompute_totals();

}  // namespace hpctrain
