// CUDA queries for device choice; compiled only in CUDA builds (device_nocuda.cpp otherwise).
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>

#include "runtime/device.h"

namespace hpctrain {

int visible_cuda_devices() {
  int n = 0;
  // No driver or no GPU returns an error, which means "no GPU", not a crash.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

void activate_device(const DeviceChoice& d) {
  if (d.cuda) c10::cuda::set_device(static_cast<c10::DeviceIndex>(d.index));
}

std::string cuda_device_name(int index) {
  cudaDeviceProp p;
  return cudaGetDeviceProperties(&p, index) == cudaSuccess ? std::string(p.name) : "";
}

double cuda_device_memory_gib(int index) {
  cudaDeviceProp p;
  return cudaGetDeviceProperties(&p, index) == cudaSuccess ? p.totalGlobalMem / 1073741824.0 : 0;
}

double peak_rss_mb();

double peak_memory_mb(const DeviceChoice& d) {
  if (!d.cuda) return peak_rss_mb();
  auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(d.index));
  return stats.allocated_bytes[0].peak / 1048576.0;
}

double cuda_memory_in_use_mb(int index) {
  auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(index));
  return stats.allocated_bytes[0].current / 1048576.0;
}

}  // namespace hpctrain
