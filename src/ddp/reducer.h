// Reducer: turns per-parameter "gradient ready" events into in-order bucketed allreduces.
//
// Contract:
// - on_grad_ready(i) is called once per parameter per synchronized backward (from autograd
//   hooks, any thread). It moves parameter i's gradient into its bucket slot, pre-scaled by
//   1/world, so the allreduce SUM yields the average.
// - A bucket is launched when all its slots are filled AND every earlier bucket has been
//   launched: buckets always go in plan order, so every rank issues the same collective
//   sequence whatever order its hooks fire in.
// - finalize() launches what is left (unused parameters count as zeros when
//   find_unused_parameters is on; otherwise it is an error naming every such parameter),
//   waits for every bucket, and leaves the averaged gradient in each parameter's .grad, which
//   is a view into bucket memory (no copy back, no allocation after the first step).
// - Gradients must be on the device the communicator carries; otherwise the error names both.
// - ZeRO-1 mode (ReducerOptions::zero set): each bucket buffer is padded to its partition size
//   and reduce-scattered instead of allreduced, in the same order and at the same moments; after
//   finalize() grad_shard() holds this rank's block of every bucket (averaged, concatenated in
//   bucket order), while the parameters' .grad keep the local, unreduced gradients.
// - ZeRO-2 mode (ReducerOptions::shard_gradients, with zero set): only grad_shard() persists.
//   A bucket's full buffer is allocated when its first gradient of a synchronized backward
//   arrives; each hook copies the parameter's .grad into its slot and then drops .grad (it stays
//   undefined between steps); the buffer (and its comm_dtype copy) is released as soon as its
//   reduce-scatter has completed (checked at each launch, at the latest in finalize()). Under
//   no_sync the hooks do nothing, so accumulation happens in autograd's own .grad tensors (full
//   size, one per parameter) until the synchronized backward moves them into the buckets.
// - held_grad_bytes(): the gradient memory this rank holds right now (bucket buffers, their
//   comm_dtype copies, the shard and, under ZeRO-2, any parameter .grad not yet taken);
//   last_stats().peak_grad_bytes the most it held during the last synchronized backward.
// - comm_dtype (bfloat16/float16 for float32 gradients): a launched bucket is cast into a
//   persistent buffer of that dtype (after the 1/world scaling), reduced in it (the
//   communicator sums each combine in float32 where it can: comm/communicator.h), and cast back
//   in finalize(); the averaged gradient is then rounded to that dtype. A world of one casts
//   nothing. Undefined or the gradients' own dtype: no cast.
// - wire_dtype() is the dtype the buckets are handed to the communicator in (what the run
//   actually does, not what was asked), and last_stats().bytes_reduced the bytes of the buffers
//   this step handed to it, counted as each bucket is launched (padded under ZeRO; 0 in a world
//   of one, which reduces nothing); describe_comm() says both for the log.
#pragma once

#include <ATen/core/Tensor.h>

#include <mutex>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "ddp/bucket_plan.h"

namespace hpctrain {

struct ZeroPartition;

struct ReducerOptions {
  bool find_unused_parameters = false;
  const ZeroPartition* zero = nullptr;  // ZeRO-1: reduce-scatter over this partition
  at::ScalarType comm_dtype = at::ScalarType::Undefined;  // reduce in this dtype (see contract)
  bool shard_gradients = false;  // ZeRO-2: keep only the gradient shard (needs zero)
};

struct ReducerStats {
  double finalize_wait_s = 0;  // time finalize() spent blocked on communication
  int64_t bytes_reduced = 0;  // handed to the collectives this step (see contract)
  int buckets = 0;
  int64_t peak_grad_bytes = 0;  // the most held_grad_bytes() reached during the step
};

class Reducer {
 public:
  Reducer(std::vector<at::Tensor> params, std::vector<std::string> names, BucketPlan plan, Communicator& comm,
          ReducerOptions opts);

  void on_grad_ready(size_t param_index);
  // Completes the step (see contract). Throws hpctrain::Error for unused parameters.
  void finalize();
  // Zeroes every gradient in place (bucket memory), without allocating.
  void zero_grad();
  // Drops the state of an interrupted backward (after an exception).
  void reset();

  const BucketPlan& plan() const { return plan_; }
  const ReducerStats& last_stats() const { return stats_; }
  // The dtype buckets are reduced in (Undefined without parameters) and the bytes one
  // synchronized step hands to the collectives; "gradient communication: bfloat16 (float32
  // gradients cast per bucket, the average rounded to bfloat16), 2 bucket(s), 12345 bytes per step".
  at::ScalarType wire_dtype() const;
  std::string wire_dtype_name() const;  // "bfloat16", "float16", "float32", ...; "none"
  int64_t bytes_per_step() const;
  std::string describe_comm() const;
  // The bucket's full buffer; undefined under ZeRO-2 outside a synchronized backward.
  const at::Tensor& bucket_buffer(size_t b) const { return buffers_[b]; }
  int64_t held_grad_bytes() const;
  bool shards_gradients() const { return opts_.shard_gradients; }
  // ZeRO-1: this rank's averaged gradient blocks, flat (partition's shard layout), and one view
  // per bucket. Empty otherwise.
  const at::Tensor& grad_shard() const { return grad_shard_; }
  const std::vector<at::Tensor>& grad_blocks() const { return grad_blocks_; }

 private:
  void launch_ready_locked();
  void bind_grad_locked(size_t i);
  void take_grad_locked(size_t i);       // ZeRO-2: .grad into its slot, then dropped
  void ensure_bucket_locked(size_t b);   // ZeRO-2: allocate bucket b's buffers and slots
  void release_bucket_locked(size_t b, bool keep_comm_copy = false);  // ZeRO-2: drop its buffers
  void release_done_locked();            // ZeRO-2: release buckets whose reduce-scatter completed
  int64_t held_bytes_locked() const;

  std::vector<at::Tensor> params_;
  std::vector<std::string> names_;
  BucketPlan plan_;
  Communicator& comm_;
  ReducerOptions opts_;
  double scale_;

  std::vector<at::Tensor> buffers_;      // one flat buffer per bucket (padded under ZeRO)
  std::vector<int64_t> bucket_numel_;    // per bucket: its buffer's elements
  at::ScalarType grad_dtype_ = at::ScalarType::Undefined;
  bool cast_ = false;                    // comm_dtype differs: buckets travel in comm_bufs_
  std::vector<at::Tensor> comm_bufs_;    // comm_dtype: per bucket, what is reduced (empty: buffers_)
  std::vector<at::Tensor> comm_blocks_;  // comm_dtype under ZeRO: per bucket, the reduced block
  at::Tensor grad_shard_;                // ZeRO: this rank's reduced blocks
  std::vector<at::Tensor> grad_blocks_;  // ZeRO: per bucket, a view of grad_shard_
  std::vector<at::Tensor> slots_;        // per parameter: a view of its bucket, param-shaped
  mutable std::mutex mu_;
  std::vector<char> filled_;       // per parameter, this step
  std::vector<int64_t> pending_;   // per bucket: slots still to fill
  std::vector<WorkHandle> works_;  // per launched bucket
  std::vector<size_t> work_bucket_;  // the bucket of each works_ entry
  size_t next_launch_ = 0;
  int64_t launched_bytes_ = 0;  // this step, so far
  int64_t peak_held_ = 0;       // this step, so far (held_bytes_locked)
  bool any_ready_ = false;
  ReducerStats stats_;
};

}  // namespace hpctrain
