// Mixed precision: autocast scopes and the dynamic loss scaler.
//
// Contract:
// - check_amp(amp, device): fp16 on CPU is a CollectiveError that says why; bf16 works on CPU
//   (LibTorch's CPU autocast) and CUDA; fp16 on CUDA uses the loss scaler.
// - AutocastScope enables autocast for one device type and dtype for its lifetime.
// - LossScaler (fp16): scale starts at 65536, x2 after 2000 consecutive good steps, x0.5 on an
//   overflow. The inf/nan verdict is agreed across ranks by a MAX allreduce of the local
//   found-inf flag, so every rank skips the same steps and replicas stay identical.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace hpctrain {

class Communicator;

void check_amp(const std::string& amp, bool cuda);

class AutocastScope {
 public:
  AutocastScope(const std::string& amp, bool cuda);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType type_;
  bool prev_enabled_ = false;
  at::ScalarType prev_dtype_;
};

class LossScaler {
 public:
  explicit LossScaler(bool enabled, double init_scale = 65536.0, double growth = 2.0, double backoff = 0.5,
                      int64_t growth_interval = 2000);
  bool enabled() const { return enabled_; }
  at::Tensor scale_loss(const at::Tensor& loss) const;
  // Unscales gradients in place and returns true when every rank's gradients are finite.
  // Collective when enabled.
  bool unscale_and_check(const std::vector<at::Tensor>& params, Communicator& comm);
  // The same over gradient tensors themselves (ZeRO-1: each rank's gradient shard; the MAX
  // allreduce makes every shard's verdict everyone's).
  bool unscale_and_check_grads(const std::vector<at::Tensor>& grads, Communicator& comm);
  // Updates the scale after a step (skipped = an overflow was found).
  void update(bool skipped);
  double scale() const { return scale_; }
  int64_t good_steps() const { return good_; }
  int64_t skipped_steps() const { return skipped_total_; }
  void restore(double scale, int64_t good) { scale_ = scale, good_ = good; }

 private:
  bool enabled_;
  double scale_, growth_, backoff_;
  int64_t interval_, good_ = 0, skipped_total_ = 0;
};

}  // namespace hpctrain
