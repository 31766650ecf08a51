// FsdpEngine: ZeRO stage 3 (--zero 3), parameters sharded over ranks and gathered per unit.
//
// Contract:
// - The model is cut into units (a transformer block; ...) plus the root: every trained
//   parameter that is in no unit. Each unit's parameters (the root's too) are laid out in one
//   flat float buffer, padded to a multiple of the world size; rank r owns block r of it
//   (`shard`, the fp32 master values the optimizer steps) and the gradient of that block
//   (`grad_blocks()`). Any parameter count works (padding stays zero). The layout is a
//   ZeroPartition with one "bucket" per unit, root last, so checkpoints record and reshard it
//   exactly as ZeRO-1's (ddp/zero_partition.h).
// - Between steps a rank holds only its shards: every parameter keeps its shape but is a view
//   of its unit's flat buffer whose storage has 0 bytes (resident_param_bytes()). That storage
//   allocates through unpooled_allocator() (runtime/host_tensor.h) and each parameter gradient
//   reduction's full-size buffer is empty_unpooled: a released unit's pages and a reduced
//   gradient's go back to the system, not into the heap.
// - Construction is collective: the parameters' values are broadcast from rank 0 (as DDP does),
//   then each rank keeps its block. A unit whose parameters are on the meta device (a model built
//   without memory, model/sharded_model.h) is not broadcast: its parameters are replaced by new
//   CPU tensors (unit_params(u); the caller installs them in the model) and its shard stays zero
//   until init_shards fills it, one parameter at a time.
// - begin_forward() gathers the root (allgather_into). run_unit(u, fn, x) gathers unit u (or
//   waits for its prefetch), starts the all-gather of the next unit in forward order on the comm
//   thread, runs fn(x) and releases the unit's bytes. With autograd it is a custom autograd
//   function: its backward gathers the unit again (the tensors fn saved for backward are views
//   of the re-allocated storage, so no recompute), prefetches the previous unit, computes the
//   gradients of the unit's input and parameters, releases the unit, and reduce-scatters the
//   parameters' gradient (scaled by 1/world, in grad_comm_dtype when set) into this rank's
//   gradient block, asynchronously; at most two units' full gradients are alive at once.
// - end_forward(out): without autograd the root is released; with it, the end of the backward
//   pass (an autograd engine callback) completes every reduce-scatter, reduce-scatters the
//   root's gradient (the root's .grad, then dropped) and releases the root. Gradients add up
//   over backward passes (gradient accumulation) until zero_grad().
// - Units run in the order the first forward ran them. In that forward every rank says which
//   unit it is at before each unit and at the end (one small allgather each), so a rank that
//   takes another path is a CollectiveError on every rank naming the rank and both units, before
//   any gather could pair different units. Later a unit out of that order, or a unit that got no
//   gradient, is an hpctrain::Error naming the unit and the step on the rank that saw it (which
//   aborts the world: no rank is left waiting).
// - Mixed precision (FsdpOptions::param_dtype bf16, as --amp bf16; FSDP2's param_dtype): each
//   rank casts its fp32 master block of a unit to bf16 (round to nearest even, as autocast's
//   cast) and the unit is all-gathered in bf16 into a bf16 flat buffer: half the bytes on the wire
//   (stats().bytes_gathered) and half the gathered unit. The unit's matrices (two or more
//   dimensions) are bf16 parameters viewing that buffer, so autocast's casts of them are no-ops
//   and the tensors its graph saves for backward are those views (released with the unit, not
//   bf16 copies kept alive until backward). Its vectors (norm weights, biases: under one percent
//   of a unit) are float32 parameters filled from the bf16 gather, so BatchNorm/LayerNorm keep
//   float32 parameters as under autocast. A unit runs its function under CPU bf16 autocast if
//   the caller has none (a bf16 matrix needs it). The root stays float32 (gpt's embeddings: a
//   bf16 table would make the residual stream bf16, which autocast does not). Gradients are
//   reduced into the fp32 gradient blocks as above and the optimizer steps the fp32 shards;
//   gather_unit/capture_full all-gather the fp32 masters, never the bf16 values.
// - The unit functions must not run collectives of their own outside the ones every rank runs
//   in the same order (SyncBatchNorm's are fine). CPU tensors only (the trainer refuses CUDA).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "ddp/zero_partition.h"
#include "runtime/named_tensors.h"

namespace hpctrain {

struct FsdpUnitSpec {
  std::string name;     // "transformer.h.3", "(root)"
  NamedTensors params;  // trained parameters, each listed once
};

// Writes parameter `name`'s initial values into `out` (CPU float, the parameter's shape).
using FsdpParamInit = std::function<void(const std::string& name, at::Tensor& out)>;

struct FsdpOptions {
  at::ScalarType grad_comm_dtype = at::ScalarType::Undefined;
  // The units' compute dtype (--amp bf16: kBFloat16; Undefined or kFloat: float32). See the
  // contract's "Mixed precision".
  at::ScalarType param_dtype = at::ScalarType::Undefined;
};

struct FsdpStats {
  int64_t bytes_gathered = 0, bytes_reduced = 0;  // handed to the collectives since the last zero_grad()
  double wait_s = 0;                              // blocked on gathers and reductions
};

class FsdpEngine {
 public:
  FsdpEngine(std::vector<FsdpUnitSpec> units, FsdpUnitSpec root, Communicator& comm, FsdpOptions opts = {});
  ~FsdpEngine();
  FsdpEngine(const FsdpEngine&) = delete;
  FsdpEngine& operator=(const FsdpEngine&) = delete;

  void begin_forward();
  at::Tensor run_unit(size_t unit, const std::function<at::Tensor(const at::Tensor&)>& fn, const at::Tensor& x);
  at::Tensor end_forward(const at::Tensor& out);
  void zero_grad();

  const ZeroPartition& partition() const { return partition_; }
  std::vector<at::Tensor> param_blocks() const;  // per unit, root last: this rank's fp32 shard
  std::vector<at::Tensor> grad_blocks() const;
  size_t num_units() const;                       // units + the root
  const std::string& unit_name(size_t u) const;    // u == num_units() - 1: the root
  // Collective: unit u's parameters, full, as fresh float32 tensors (name, value) for a
  // checkpoint: the fp32 master values, all-gathered in float32 whatever the unit computes in.
  NamedTensors gather_unit(size_t u);
  // Collective: sets unit u's shard from full values by name (names not in the unit ignored).
  void load_unit(size_t u, const NamedTensors& full);
  // Resume: materialize() gives every unit its bytes (values unspecified; under param_dtype the
  // parameters are float32 views of a whole fp32 buffer meanwhile) so a checkpoint can be
  // loaded into the parameters; shard_from_params(true) then takes each rank's blocks from them
  // (false: leaves the shards), and releases every unit again.
  void materialize();
  // Set-up of meta units (not collective: every rank must compute the same values): for each
  // parameter in `order` (every sharded parameter once, in the order init draws), allocates its full value on the
  // CPU, has init fill it, copies this rank's part into the unit's shard and frees it. Peak: one
  // parameter beyond the shards. Throws naming a parameter missing from `order` or not sharded.
  void init_shards(const std::vector<std::string>& order, const FsdpParamInit& init);
  void shard_from_params(bool loaded);
  // Checkpoint capture: replaces each "model/<param>" tensor of `tensors` by the gathered full
  // value, unit by unit (collective).
  void capture_full(NamedTensors& tensors);
  int64_t resident_param_bytes() const;  // full buffers now allocated + shards
  // The largest unit's gathered bytes: its flat buffer (float32, or param_dtype) plus, under
  // param_dtype, its vectors' float32 values.
  int64_t largest_unit_bytes() const;
  const FsdpStats& stats() const { return stats_; }
  std::string describe() const;
  // "gradient communication: ZeRO-3, float32 reduce-scatter per unit, B bytes per step ..." and
  // the dtype gradients travel in ("float32", "bfloat16", "float16").
  std::string describe_comm() const;
  std::string wire_dtype_name() const;
  // What the units' matrices are all-gathered and computed in: "float32", or "bfloat16" /
  // "float16" under FsdpOptions::param_dtype.
  std::string gather_dtype_name() const;

  struct Unit;
  // Internal (the autograd functions of fsdp_function.cpp).
  void gather(size_t u);                     // allocate + all-gather (or wait for the prefetch)
  void prefetch(size_t u);                   // allocate + start the all-gather
  void release(size_t u);                    // 0 bytes
  void reduce_grads(size_t u, const std::vector<at::Tensor>& grads);
  void queue_finalize();
  void finish_backward();
  size_t neighbour(size_t u, int dir) const;  // next unit in forward order (dir 1) or backward (-1); npos
  std::vector<at::Tensor> unit_params(size_t u) const;
  void note_ran(size_t u, bool with_grad);
  void note_backward(size_t u);

 private:
  void complete_pending(size_t keep);
  void check_first_order();
  void agree_first(size_t u);

  Communicator& comm_;
  FsdpOptions opts_;
  std::vector<std::unique_ptr<Unit>> units_;  // root last
  ZeroPartition partition_;
  std::vector<size_t> order_, ran_;  // forward order (first forward), this forward's
  std::vector<size_t> awaiting_;     // ran forward with autograd, backward not yet run
  bool order_known_ = false, finalize_queued_ = false, root_open_ = false;
  bool built_sharded_ = false;  // a unit came on the meta device (init_shards)
  struct Pending;
  std::vector<std::unique_ptr<Pending>> pending_;
  FsdpStats stats_;
};

}  // namespace hpctrain
