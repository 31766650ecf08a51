// The training objective, chosen by --loss. Classification with integer labels uses
// cross_entropy (the default): outputs [B, num_classes] logits, targets [B] int64 in
// [0, num_classes). Regression (mse, l1, smooth_l1) compares outputs with float targets of the
// same shape [B, t1..tm]; per-sample losses are means over the target's entries.
// Language models (token data): cross_entropy on outputs [B, T, V] against next-token targets
// [B, T] int64, averaged per token; a sample's loss is its window's mean over T tokens, and
// correct() its share of next-token top-1 hits (so the dataset means are per-token means: every
// window has T tokens).
//
// Contract:
// - check_output(): the first batch's output against its targets; a mismatch is a
//   CollectiveError naming both shapes ("model output [64,7] does not fit targets [64] with 10
//   classes: cross_entropy needs [64,10]").
// - mean_loss(): the batch mean (fp32), what backward runs on.
// - per_sample(): [B] losses, for evaluation (padding samples are masked by the caller).
// - correct(): [B] bool hits for classification losses; undefined tensor otherwise.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace hpctrain {

class Loss {
 public:
  // `name` is the --loss value; `num_classes` the data set's (0 when targets are not classes).
  Loss(const std::string& name, int64_t num_classes);
  const std::string& name() const { return name_; }
  // cross_entropy; the others read float targets (regression(name) tells before any file is read).
  bool classification() const { return name_ == "cross_entropy"; }
  static bool regression(const std::string& name) { return name != "cross_entropy"; }

  void check_output(const at::Tensor& output, const at::Tensor& targets) const;
  at::Tensor mean_loss(const at::Tensor& output, const at::Tensor& targets) const;
  at::Tensor per_sample(const at::Tensor& output, const at::Tensor& targets) const;
  at::Tensor correct(const at::Tensor& output, const at::Tensor& targets) const;

 private:
  std::string name_;
  int64_t num_classes_;
};

}  // namespace hpctrain
