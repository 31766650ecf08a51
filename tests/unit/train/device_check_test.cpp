#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "runtime/check.h"
#include "train/device_check.h"

using namespace hpctrain;

TEST(DeviceCheck, MisplacedTensorNamesItAndBothDevices) {
  // No GPU here: a meta-device tensor plays the misplaced one.
  at::Tensor images = at::zeros({2, 3}), labels = at::empty({2}, at::TensorOptions().device(at::kMeta));
  try {
    check_devices({{"images", images}, {"labels", labels}}, c10::Device(c10::kCPU));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("labels are on meta, model on cpu", 0), 0u) << e.what();
  }
  EXPECT_NO_THROW(check_devices({{"images", images}}, c10::Device(c10::kCPU)));
}
