#include "train/loss.h"

#include <ATen/ATen.h>

#include "ddp/ddp.h"
#include "runtime/check.h"

namespace hpctrain {

Loss::Loss(const std::string& name, int64_t num_classes) : name_(name), num_classes_(num_classes) {
  if (name_ != "cross_entropy")
    throw CollectiveError("--loss " + name_ + " is not known (allowed: cross_entropy)");
}

void Loss::check_output(const at::Tensor& out, const at::Tensor& targets) const {
  const int64_t b = targets.size(0);
  if (out.dim() == 2 && out.size(0) == b && out.size(1) == num_classes_) return;
  throw CollectiveError("model output " + shape_string(out.sizes()) + " does not fit targets " +
                        shape_string(targets.sizes()) + " with " + std::to_string(num_classes_) +
                        " classes: " + name_ + " needs [" + std::to_string(b) + "," +
                        std::to_string(num_classes_) + "]");
}

at::Tensor Loss::mean_loss(const at::Tensor& out, const at::Tensor& targets) const {
  return at::cross_entropy_loss(out.to(at::kFloat), targets);
}

at::Tensor Loss::per_sample(const at::Tensor& out, const at::Tensor& targets) const {
  return at::cross_entropy_loss(out.to(at::kFloat), targets, {}, at::Reduction::None);
}

at::Tensor Loss::correct(const at::Tensor& out, const at::Tensor& targets) const {
  return out.argmax(1).eq(targets);
}

}  // namespace hpctrain
