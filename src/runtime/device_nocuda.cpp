// Device queries in builds without CUDA: no GPU is ever visible.
#ifndef HPCTRAIN_HAVE_CUDA
#include "runtime/check.h"
#include "runtime/device.h"

namespace hpctrain {
int visible_cuda_devices() { return 0; }
void activate_device(const DeviceChoice& d) {
  if (d.cuda) throw Error("this hpctrain was built without CUDA");
}
std::string cuda_device_name(int) { return ""; }
double cuda_device_memory_gib(int) { return 0; }
double peak_rss_mb();
double peak_memory_mb(const DeviceChoice&) { return peak_rss_mb(); }
double cuda_memory_in_use_mb(int) { return 0; }
}  // namespace hpctrain
#endif
