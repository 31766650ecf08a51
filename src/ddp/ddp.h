// DistributedDataParallel for any model: a torch::nn::Module, or named parameters and buffers
// (the trainer's model interface, model/model.h, hands over the latter).
//
// Contract:
// - Construction is collective. It checks that every rank has the same parameters (names,
//   order, shapes, dtypes); a mismatch is a CollectiveError raised identically on every rank,
//   naming the first differing parameter and the ranks. Then it broadcasts parameters and
//   buffers from rank 0, so ranks start identical whatever their seeds.
// - Gradients are reduced by a Reducer over a BucketPlan (reverse registration order, first
//   bucket <= 1 MiB, then `bucket_cap_mb`), launched from autograd hooks on each parameter's
//   gradient accumulator, i.e. after the gradient has been accumulated into .grad.
// - backward(loss) = loss.backward() + finalize(): on return every parameter's .grad holds the
//   gradient averaged over ranks.
// - no_sync(): while the returned guard lives, backward accumulates locally; the first
//   synchronized backward afterwards reduces the accumulated sum once.
// - prepare_forward() broadcasts buffers from rank 0 when broadcast_buffers is on (call it
//   before each training forward; off when SyncBatchNorm keeps statistics global).
// - The module must already be on the run's device; params on another device than the
//   communicator carries are an error naming both.
// - ZeRO-1 (DdpOptions::zero): the trained parameters are moved into one flat, padded buffer
//   per bucket (each parameter becomes a view of it; values unchanged), gradients are
//   reduce-scattered bucket by bucket as backward makes them ready (Reducer), and after
//   backward() grad_blocks() hold this rank's averaged share of the gradient while .grad holds
//   the local one. The caller steps its optimizer on param_blocks() and then calls
//   allgather_params(), which leaves every rank with the updated parameters. All trained
//   parameters must share one dtype.
// - ZeRO-2 (DdpOptions::zero and shard_gradients): as ZeRO-1, but the reducer keeps only the
//   gradient shard: .grad is undefined between steps and each bucket's full buffer lives only
//   from its first gradient to the end of its reduce-scatter (reducer.h). Gradient accumulation
//   (no_sync) accumulates in autograd's full-size .grad until the synchronized backward.
// - held_param_bytes(): the bytes of the trained and frozen parameters this rank holds (under
//   ZeRO the padded flat buckets).
// The ddp/ stage among the others, its threads and locks: docs/architecture.md.
#pragma once

#include <torch/nn/module.h>

#include <memory>

#include "comm/communicator.h"
#include "ddp/reducer.h"
#include "ddp/zero_partition.h"
#include "runtime/named_tensors.h"

namespace hpctrain {

struct DdpOptions {
  double bucket_cap_mb = 25.0;
  double first_bucket_mb = 1.0;
  bool find_unused_parameters = false;
  bool broadcast_buffers = true;
  bool zero = false;  // ZeRO-1: shard the gradient reduction (see contract)
  bool shard_gradients = false;  // ZeRO-2 (with zero): keep only the gradient shard
  // Gradients travel in this dtype (kBFloat16/kHalf halve the bytes; Undefined: their own dtype).
  at::ScalarType grad_comm_dtype = at::ScalarType::Undefined;
};

struct DdpStepStats {
  double backward_s = 0;       // loss.backward() + finalize()
  double finalize_wait_s = 0;  // of which blocked waiting for communication
  int64_t bytes_reduced = 0;
  int buckets = 0;
};

class DistributedDataParallel {
 public:
  DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, Communicator& comm, DdpOptions opts = {});
  // `params`: the model's parameters (those not requiring grad are broadcast but not reduced; a
  // tensor listed under several names, tied weights, counts once, under its first name);
  // `buffers`: broadcast at construction and, with broadcast_buffers, before each forward.
  DistributedDataParallel(NamedTensors params, NamedTensors buffers, Communicator& comm, DdpOptions opts = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  void prepare_forward();
  void backward(const at::Tensor& loss);
  void finalize();
  void zero_grad();

  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& d) : d_(&d) { d_->sync_enabled_ = false; }
    NoSync(NoSync&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
    ~NoSync() {
      if (d_) d_->sync_enabled_ = true;
    }

   private:
    DistributedDataParallel* d_;
  };
  NoSync no_sync() { return NoSync(*this); }
  bool sync_enabled() const { return sync_enabled_; }

  // ZeRO-1 and ZeRO-2 (zero() true); zero_stage() 0, 1 or 2.
  bool zero() const { return zero_ != nullptr; }
  int zero_stage() const { return zero_ ? (opts_.shard_gradients ? 2 : 1) : 0; }
  int64_t held_param_bytes() const;
  const ZeroPartition& zero_partition() const;
  // This rank's parameter blocks (views of the bucket parameter buffers) and averaged gradient
  // blocks, one per bucket, in partition order.
  std::vector<at::Tensor> param_blocks() const;
  const std::vector<at::Tensor>& grad_blocks() const { return reducer_->grad_blocks(); }
  // Collective: every rank's updated blocks to every rank, in place (allgather_into per bucket).
  void allgather_params();

  const BucketPlan& plan() const { return reducer_->plan(); }
  Reducer& reducer() { return *reducer_; }
  const DdpStepStats& last_step() const { return stats_; }

 private:
  void check_same_parameters();
  void broadcast_state();
  void install_hooks();
  void flatten_parameters();

  Communicator& comm_;
  DdpOptions opts_;
  std::vector<std::string> names_;
  std::vector<at::Tensor> params_;                // trained (requires_grad) parameters, reduced by buckets
  std::vector<at::Tensor> all_params_, buffers_;  // broadcast from rank 0
  std::unique_ptr<ZeroPartition> zero_;
  std::vector<at::Tensor> param_buffers_;  // ZeRO: one padded flat buffer per bucket
  std::unique_ptr<Reducer> reducer_;
  std::vector<c10::intrusive_ptr<torch::autograd::Node>> accumulators_;  // keep hooks alive
  bool sync_enabled_ = true;
  DdpStepStats stats_;
};

}  // namespace hpctrain
