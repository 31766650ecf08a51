#include "train/device_check.h"

#include "runtime/check.h"

namespace hpctrain {

void check_devices(const std::vector<std::pair<std::string, at::Tensor>>& tensors, const c10::Device& device) {
  for (auto& [name, t] : tensors)
    if (t.defined() && t.device() != device)
      throw Error(name + (name.back() == 's' ? " are" : " is") + " on " + t.device().str() + ", model on " +
                  device.str() + " (everything a step touches must be on the run's device)");
}

}  // namespace hpctrain
