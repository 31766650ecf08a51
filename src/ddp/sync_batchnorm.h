// SyncBatchNorm: batch normalization whose training statistics cover the global batch (every
// rank's local batch), for inputs [N,C], [N,C,L], [N,C,H,W] and [N,C,D,H,W].
//
// Contract:
// - Options, parameter and buffer names and shapes are those of torch::nn::BatchNorm{1,2,3}d
//   (weight, bias, running_mean, running_var, num_batches_tracked), so a checkpoint of a model
//   with SyncBatchNorm loads into the same model with BatchNorm and back.
// - Training: ONE allgather per forward (every rank's local per-channel mean, biased variance
//   and count, combined in fp64 with Chan's formula) and ONE allreduce per backward (sum of dy
//   and of dy*xhat). Every pass over the activation is an ATen fused batch-norm kernel. The input is normalized by the
//   global mean and biased variance; running_var gets the unbiased global variance with torch's
//   momentum rule (momentum = nullopt: cumulative average). Weight and bias gradients are the
//   LOCAL sums (DDP averages them over ranks); the input gradient uses the globally SUMMED
//   sums divided by the global count, as PyTorch's SyncBatchNorm does. With equal local batches
//   and a per-rank mean loss, every rank's input gradient is world_size times the one of
//   single-process BN on the concatenated batch with a global mean loss, which is exactly what
//   makes the DDP-averaged parameter gradients upstream equal the single-process ones.
// - Local batches may differ in size, and may be empty: an empty rank still joins both
//   collectives (its backward must run: its loss must depend on the output, as it does when the
//   loss is computed from the output tensor, even an empty one).
// - Eval mode never communicates: it uses the running stats (or, without them, the local
//   batch, as torch's BatchNorm and PyTorch's SyncBatchNorm do). A null
//   communicator or a world of 1 calls torch's own batch_norm, so results equal
//   torch::nn::BatchNorm bit for bit.
// - Every rank must run the same number of training forwards and backwards of each layer, in
//   the same order, or the collectives mismatch. The trainer guarantees it (equal batch counts
//   per rank, from the DistributedSampler); if it is violated anyway, the collective watchdog
//   names the layer from the tag "syncbn.<name>" ("syncbn.<name>.backward").
// - A rank whose input is invalid (wrong rank/channels/dtype) still joins the forward
//   collective with an error flag, so every rank throws hpctrain::Error naming that rank instead
//   of hanging.
// - `comm` is not owned and must outlive the module.
#pragma once

#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/options/batchnorm.h>
#include <torch/nn/pimpl.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace hpctrain {

class SyncBatchNormImpl : public torch::nn::Cloneable<SyncBatchNormImpl> {
 public:
  // `name` is used in collective tags ("syncbn.<name>"); convert_sync_batchnorm sets it to the
  // module's dotted path.
  explicit SyncBatchNormImpl(const torch::nn::BatchNormOptions& options, Communicator* comm = nullptr,
                             std::string name = {});
  // Adopts `bn`'s parameters and buffers (the very tensors, found by their BatchNorm names)
  // instead of creating new ones: values, devices and requires_grad are kept, and an optimizer
  // that holds them keeps working. Used by convert_sync_batchnorm.
  SyncBatchNormImpl(const torch::nn::BatchNormOptions& options, Communicator* comm, std::string name,
                    const torch::nn::Module& bn);

  void reset() override;
  void reset_running_stats();
  void reset_parameters();

  // x: [N,C,*] with 2 <= dim <= 5 and C == num_features.
  at::Tensor forward(const at::Tensor& x);
  void pretty_print(std::ostream& stream) const override;

  Communicator* communicator() const { return comm_; }
  void set_communicator(Communicator* comm) { comm_ = comm; }
  const std::string& name_for_tags() const { return name_; }
  void set_name_for_tags(std::string name) { name_ = std::move(name); }
  // Number of training forwards that went through the collective path (for tests and stats).
  int64_t synced_forwards() const { return synced_forwards_; }

  torch::nn::BatchNormOptions options;
  at::Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  // Registers the state under torch's BatchNorm names, in torch's order.
  void register_state(at::Tensor w, at::Tensor b, at::Tensor rm, at::Tensor rv, at::Tensor nbt);
  // The momentum factor for this step (and num_batches_tracked += 1), as torch's BatchNorm.
  double next_average_factor();

  Communicator* comm_ = nullptr;
  std::string name_;
  int64_t synced_forwards_ = 0;
};
TORCH_MODULE(SyncBatchNorm);

// Replaces every torch::nn::BatchNorm{1,2,3}d in the tree under `root` (at any depth, `root`
// included) with a SyncBatchNorm using `comm`, keeping options, parameter and buffer tensors
// (the same tensors, so values, names, devices and requires_grad are kept) and training mode.
// Returns the new root (the same object unless `root` itself is a BatchNorm).
// Parents handled: Sequential (both its registry and the AnyModule list its forward uses),
// ModuleList, ModuleDict. Any other parent is a custom module whose typed member would keep
// calling the old BatchNorm after `replace_module`, silently; that case throws hpctrain::Error
// naming the path. Build such models with make_batch_norm() instead (the trainer's models do).
// Returns the dotted names of the replaced modules in `replaced` when non-null.
std::shared_ptr<torch::nn::Module> convert_sync_batchnorm(std::shared_ptr<torch::nn::Module> root, Communicator* comm,
                                                          std::vector<std::string>* replaced = nullptr);

// A norm-layer factory for models: torch::nn::BatchNorm{dims}d when `comm` is null, else a
// SyncBatchNorm named `name`. Both register the same state names, so checkpoints are
// interchangeable. `dims` is 1, 2 or 3. Register the result with register_module(name, m.ptr())
// and call m.forward(x).
torch::nn::AnyModule make_batch_norm(int dims, const torch::nn::BatchNormOptions& options, Communicator* comm,
                                     const std::string& name);

}  // namespace hpctrain
