#include <gtest/gtest.h>

#include <cstdlib>

#include "runtime/check.h"
#include "runtime/device.h"

using hpctrain::choose_device;
using hpctrain::CollectiveError;

namespace {
std::string error_of(const std::string& spec, int lr, int ls, int gpus) {
  try {
    choose_device(spec, lr, ls, gpus);
  } catch (const CollectiveError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(DeviceChoice, AutoPicksCpuWithoutGpus) {
  auto d = choose_device("auto", 0, 2, 0);
  EXPECT_FALSE(d.cuda);
  EXPECT_EQ(d.str(), "cpu");
}

TEST(DeviceChoice, AutoAndCudaTakeLocalRankGpu) {
  EXPECT_EQ(choose_device("auto", 3, 4, 4).str(), "cuda:3");
  EXPECT_EQ(choose_device("cuda", 1, 2, 8).str(), "cuda:1");
  EXPECT_EQ(choose_device("cuda:5", 0, 1, 8).str(), "cuda:5");
  EXPECT_EQ(choose_device("cpu", 0, 1, 8).str(), "cpu");
}

TEST(DeviceChoice, CudaWithoutGpuNamesTheProblem) {
  auto msg = error_of("cuda", 0, 1, 0);
  EXPECT_NE(msg.find("needs a CUDA GPU"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0 visible GPU"), std::string::npos) << msg;
}

TEST(DeviceChoice, MoreLocalRanksThanGpusNamesBothNumbers) {
  auto msg = error_of("cuda", 0, 4, 2);
  EXPECT_NE(msg.find("4 ranks on this node"), std::string::npos) << msg;
  EXPECT_NE(msg.find("only 2 visible GPU"), std::string::npos) << msg;
}

TEST(DeviceChoice, CudaVisibleDevicesIsReported) {
  setenv("CUDA_VISIBLE_DEVICES", "2,3", 1);
  auto msg = error_of("cuda:2", 0, 1, 2);
  unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_NE(msg.find("CUDA_VISIBLE_DEVICES=\"2,3\""), std::string::npos) << msg;
}

TEST(DeviceChoice, BadSpecsAreRejected) {
  EXPECT_NE(error_of("gpu", 0, 1, 1).find("unknown device"), std::string::npos);
  EXPECT_NE(error_of("cuda:x", 0, 1, 1).find("expected cuda:N"), std::string::npos);
  EXPECT_NE(error_of("cuda:-1", 0, 1, 1).find("expected cuda:N"), std::string::npos);
}
