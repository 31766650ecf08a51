// Device choice for a rank: --device auto|cpu|cuda|cuda:N.
//
// Contract:
// - auto: CUDA when a GPU is visible, else CPU.
// - cuda: local rank i takes visible GPU i (CUDA_VISIBLE_DEVICES is respected by the driver);
//   more local ranks than visible GPUs is an error naming both numbers (no silent sharing).
// - cuda:N: exactly GPU N, which must be visible.
// - Errors are hpctrain::CollectiveError when every rank sees the same inputs.
#pragma once

#include <string>

namespace hpctrain {

struct DeviceChoice {
  bool cuda = false;
  int index = -1;  // CUDA ordinal, -1 for CPU
  std::string str() const { return cuda ? "cuda:" + std::to_string(index) : "cpu"; }
};

// Pure decision, for tests: no device is touched.
DeviceChoice choose_device(const std::string& spec, int local_rank, int local_size, int visible_gpus);

// Number of CUDA devices this process sees (0 without a driver or without CUDA support).
int visible_cuda_devices();

// Makes `d` the current device (before any NCCL or CUDA context is created). No-op for CPU.
void activate_device(const DeviceChoice& d);

// Name and total memory of CUDA device `index` ("" / 0 when unavailable).
std::string cuda_device_name(int index);
double cuda_device_memory_gib(int index);

// Peak memory of this process on `d`: the CUDA caching allocator's peak for a GPU, the peak
// resident set size for the CPU. In MiB.
double peak_memory_mb(const DeviceChoice& d);
// Bytes currently allocated / total on a GPU (0 for the CPU), for out-of-memory reports.
double cuda_memory_in_use_mb(int index);

}  // namespace hpctrain
