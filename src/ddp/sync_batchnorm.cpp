// SyncBatchNorm module: state registration identical to torch::nn::BatchNorm, the choice
// between the collective path and torch's own batch_norm, and the running-stat update.
#include "ddp/sync_batchnorm.h"

#include <ATen/ATen.h>
#include <c10/util/irange.h>
#include <torch/nn/init.h>

#include <ostream>

#include "ddp/sync_bn_function.h"
#include "runtime/check.h"

namespace hpctrain {

SyncBatchNormImpl::SyncBatchNormImpl(const torch::nn::BatchNormOptions& options_, Communicator* comm, std::string name)
    : options(options_), comm_(comm), name_(std::move(name)) {
  SyncBatchNormImpl::reset();
}

SyncBatchNormImpl::SyncBatchNormImpl(const torch::nn::BatchNormOptions& options_, Communicator* comm, std::string name,
                                     const torch::nn::Module& bn)
    : options(options_), comm_(comm), name_(std::move(name)) {
  auto params = bn.named_parameters(/*recurse=*/false);
  auto buffers = bn.named_buffers(/*recurse=*/false);
  auto get = [](const auto& dict, const char* key) {
    const at::Tensor* t = dict.find(key);
    return t ? *t : at::Tensor();
  };
  register_state(get(params, "weight"), get(params, "bias"), get(buffers, "running_mean"), get(buffers, "running_var"),
                 get(buffers, "num_batches_tracked"));
}

void SyncBatchNormImpl::register_state(at::Tensor w, at::Tensor b, at::Tensor rm, at::Tensor rv, at::Tensor nbt) {
  // register_parameter sets requires_grad; keep the adopted tensors' own flag.
  weight = register_parameter("weight", w, w.defined() && w.requires_grad());
  bias = register_parameter("bias", b, b.defined() && b.requires_grad());
  running_mean = register_buffer("running_mean", rm);
  running_var = register_buffer("running_var", rv);
  num_batches_tracked = register_buffer("num_batches_tracked", nbt);
}

// Same state, names and order as torch::nn::NormImplBase::reset().
void SyncBatchNormImpl::reset() {
  const int64_t C = options.num_features();
  const bool affine = options.affine(), track = options.track_running_stats();
  register_state(affine ? at::empty({C}).requires_grad_() : at::Tensor(),
                 affine ? at::empty({C}).requires_grad_() : at::Tensor(), track ? at::zeros({C}) : at::Tensor(),
                 track ? at::ones({C}) : at::Tensor(), track ? at::zeros({}, at::kLong) : at::Tensor());
  reset_parameters();
}

void SyncBatchNormImpl::reset_running_stats() {
  if (!options.track_running_stats()) return;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

void SyncBatchNormImpl::reset_parameters() {
  reset_running_stats();
  if (options.affine()) {
    torch::nn::init::ones_(weight);
    torch::nn::init::zeros_(bias);
  }
}

double SyncBatchNormImpl::next_average_factor() {
  double factor = options.momentum().value_or(0.0);
  if (is_training() && options.track_running_stats() && num_batches_tracked.defined()) {
    num_batches_tracked += 1;
    if (!options.momentum().has_value())
      factor = 1.0 / num_batches_tracked.item<double>();  // cumulative moving average
  }
  return factor;
}

at::Tensor SyncBatchNormImpl::forward(const at::Tensor& x) {
  const int64_t C = options.num_features();
  std::string why;
  if (x.dim() < 2 || x.dim() > 5)
    why = "expected a 2D to 5D input [N,C,...], got shape " + c10::str(x.sizes());
  else if (x.size(1) != C)
    why = "expected " + std::to_string(C) + " channels, got input of shape " + c10::str(x.sizes());
  else if (!at::isFloatingType(x.scalar_type()))
    why = std::string("expected a floating input, got ") + c10::toString(x.scalar_type());

  const bool sync = is_training() && comm_ != nullptr && comm_->size() > 1;
  if (!sync) {
    // No communication: torch's own kernel, so results equal torch::nn::BatchNorm exactly.
    if (!why.empty()) throw Error("syncbn." + name_ + ": " + why);
    double factor = next_average_factor();
    return at::batch_norm(x, weight, bias, running_mean, running_var, is_training() || !options.track_running_stats(),
                          factor, options.eps(),
                          /*cudnn_enabled=*/true);
  }

  // The invalid-input rank joins the collective too (see sync_batch_norm_train).
  SyncBnStats stats;
  at::Tensor out =
      sync_batch_norm_train(x, weight, bias, options.eps(), C, *comm_, "syncbn." + name_, &stats, why.empty(), why);
  ++synced_forwards_;
  double factor = next_average_factor();
  if (options.track_running_stats()) {
    at::NoGradGuard no_grad;
    // torch updates running_var with the unbiased variance of the (here: global) batch.
    const double n = static_cast<double>(stats.count);
    at::Tensor unbiased = stats.var * (n / (n - 1.0));
    running_mean.mul_(1.0 - factor).add_(stats.mean.to(running_mean.scalar_type()), factor);
    running_var.mul_(1.0 - factor).add_(unbiased.to(running_var.scalar_type()), factor);
  }
  return out;
}

void SyncBatchNormImpl::pretty_print(std::ostream& stream) const {
  stream << std::boolalpha << "hpctrain::SyncBatchNorm(" << options.num_features() << ", eps=" << options.eps()
         << ", momentum=";
  if (options.momentum().has_value())
    stream << *options.momentum();
  else
    stream << "None";
  stream << ", affine=" << options.affine() << ", track_running_stats=" << options.track_running_stats() << ")";
}

}  // namespace hpctrain
