// Mixed precision: the device check for --amp, autocast scopes, and the fp16 loss scaler
// (overflow agreed over ranks so every rank skips the same steps).
#include "optim/amp.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include "comm/blocking.h"
#include "comm/communicator.h"
#include "runtime/check.h"

namespace hpctrain {

void check_amp(const std::string& amp, bool cuda) {
  if (amp == "fp16" && !cuda)
    throw CollectiveError(
        "--amp fp16 needs a CUDA device: LibTorch's CPU autocast computes in bfloat16 only, and "
        "fp16 matmuls on CPU are slow and overflow-prone; use --amp bf16 on CPU");
  if (amp != "off" && amp != "bf16" && amp != "fp16")
    throw CollectiveError("--amp " + amp + " is not allowed (allowed: off|bf16|fp16)");
}

AutocastScope::AutocastScope(const std::string& amp, bool cuda)
    : type_(cuda ? c10::DeviceType::CUDA : c10::DeviceType::CPU) {
  if (amp == "off") return;
  active_ = true;
  prev_enabled_ = at::autocast::is_autocast_enabled(type_);
  prev_dtype_ = at::autocast::get_autocast_dtype(type_);
  at::autocast::set_autocast_enabled(type_, true);
  at::autocast::set_autocast_dtype(type_, amp == "fp16" ? at::kHalf : at::kBFloat16);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // Casts cached inside the scope refer to this step's weights: drop them on the way out.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(type_, prev_enabled_);
  at::autocast::set_autocast_dtype(type_, prev_dtype_);
}

LossScaler::LossScaler(bool enabled, double init_scale, double growth, double backoff, int64_t growth_interval)
    : enabled_(enabled), scale_(init_scale), growth_(growth), backoff_(backoff), interval_(growth_interval) {}

at::Tensor LossScaler::scale_loss(const at::Tensor& loss) const { return enabled_ ? loss * scale_ : loss; }

bool LossScaler::unscale_and_check(const std::vector<at::Tensor>& params, Communicator& comm) {
  if (!enabled_) return true;
  std::vector<at::Tensor> grads;
  for (auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  return unscale_and_check_grads(grads, comm);
}

bool LossScaler::unscale_and_check_grads(const std::vector<at::Tensor>& grads, Communicator& comm) {
  if (!enabled_) return true;
  int found = 0;
  for (const auto& g0 : grads) {
    at::Tensor g = g0;
    g.mul_(1.0 / scale_);
    if (!found && !g.isfinite().all().item<bool>()) found = 1;
  }
  // Every rank must reach the same verdict: one rank's overflow skips the step everywhere.
  at::Tensor flag = at::full({1}, found, at::kInt);
  allreduce_now(comm, flag, ReduceOp::kMax, "amp.found_inf");
  return flag.item<int>() == 0;
}

void LossScaler::update(bool skipped) {
  if (!enabled_) return;
  if (skipped) {
    scale_ *= backoff_;
    good_ = 0;
    ++skipped_total_;
  } else if (++good_ >= interval_) {
    scale_ *= growth_;
    good_ = 0;
  }
}

}  // namespace hpctrain
