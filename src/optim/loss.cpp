// Loss: cross_entropy on fp32 logits, or mse / l1 / smooth_l1 (beta 1) on fp32 outputs; a
// regression loss per sample is the mean over the target's entries.
#include "optim/loss.h"

#include <ATen/ATen.h>

#include "runtime/check.h"
#include "runtime/tensor_text.h"

namespace hpctrain {

Loss::Loss(const std::string& name, int64_t num_classes) : name_(name), num_classes_(num_classes) {
  if (name_ != "cross_entropy" && name_ != "mse" && name_ != "l1" && name_ != "smooth_l1")
    throw CollectiveError("--loss " + name_ + " is not known (allowed: cross_entropy|mse|l1|smooth_l1)");
}

namespace {
at::Tensor regression_loss(const std::string& name, const at::Tensor& out, const at::Tensor& t,
                           at::Reduction::Reduction r) {
  at::Tensor o = out.to(at::kFloat);
  if (name == "mse") return at::mse_loss(o, t, r);
  if (name == "l1") return at::l1_loss(o, t, r);
  return at::smooth_l1_loss(o, t, r, 1.0);
}
}  // namespace

void Loss::check_output(const at::Tensor& out, const at::Tensor& targets) const {
  const int64_t b = targets.size(0);
  if (!classification()) {
    if (out.sizes() == targets.sizes()) return;
    throw CollectiveError("model output " + shape_string(out.sizes()) + " does not fit targets " +
                          shape_string(targets.sizes()) + ": " + name_ + " needs the targets' shape");
  }
  if (targets.dim() == 2) {  // token data: [B, T] targets
    const int64_t t = targets.size(1);
    if (out.dim() == 3 && out.size(0) == b && out.size(1) == t && out.size(2) == num_classes_) return;
    throw CollectiveError("model output " + shape_string(out.sizes()) + " does not fit next-token targets " +
                          shape_string(targets.sizes()) + " with vocab_size " + std::to_string(num_classes_) +
                          ": a language model returns logits [" + std::to_string(b) + "," + std::to_string(t) + "," +
                          std::to_string(num_classes_) + "]");
  }
  if (out.dim() == 2 && out.size(0) == b && out.size(1) == num_classes_) return;
  throw CollectiveError("model output " + shape_string(out.sizes()) + " does not fit targets " +
                        shape_string(targets.sizes()) + " with " + std::to_string(num_classes_) + " classes: " + name_ +
                        " needs [" + std::to_string(b) + "," + std::to_string(num_classes_) + "]");
}

at::Tensor Loss::mean_loss(const at::Tensor& out, const at::Tensor& targets) const {
  if (!classification()) return regression_loss(name_, out, targets, at::Reduction::Mean);
  if (out.dim() == 3) return at::cross_entropy_loss(out.flatten(0, 1).to(at::kFloat), targets.flatten());
  return at::cross_entropy_loss(out.to(at::kFloat), targets);
}

at::Tensor Loss::per_sample(const at::Tensor& out, const at::Tensor& targets) const {
  if (!classification()) {
    at::Tensor l = regression_loss(name_, out, targets, at::Reduction::None);
    return l.dim() > 1 ? l.flatten(1).mean(1) : l;
  }
  if (out.dim() == 3)
    return at::cross_entropy_loss(out.flatten(0, 1).to(at::kFloat), targets.flatten(), {}, at::Reduction::None)
        .view(targets.sizes())
        .mean(1);
  return at::cross_entropy_loss(out.to(at::kFloat), targets, {}, at::Reduction::None);
}

at::Tensor Loss::correct(const at::Tensor& out, const at::Tensor& targets) const {
  if (!classification()) return {};
  if (out.dim() == 3) return out.argmax(2).eq(targets).to(at::kFloat).mean(1);
  return out.argmax(1).eq(targets);
}

}  // namespace hpctrain
