// Device choice from --device (no device is touched) and the CPU's peak RSS. The CUDA
// queries are in device_cuda.cpp (device_nocuda.cpp in builds without CUDA).
#include "runtime/device.h"

#include <sys/resource.h>

#include <cstdlib>

#include "runtime/check.h"

namespace hpctrain {

DeviceChoice choose_device(const std::string& spec, int local_rank, int local_size, int visible_gpus) {
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string seen = std::to_string(visible_gpus) + " visible GPU(s)" +
                     (cvd ? std::string(" with CUDA_VISIBLE_DEVICES=\"") + cvd + "\"" : "");
  if (spec == "cpu") return {};
  if (spec == "auto" && visible_gpus == 0) return {};
  if (spec == "auto" || spec == "cuda") {
    if (visible_gpus == 0)
      throw CollectiveError("--device " + spec + " needs a CUDA GPU but this node has " + seen + "; use --device cpu");
    if (local_size > visible_gpus)
      throw CollectiveError(std::to_string(local_size) + " ranks on this node but only " + seen +
                            ": start at most one rank per GPU (no silent sharing)");
    return {true, local_rank};
  }
  if (spec.rfind("cuda:", 0) == 0) {
    char* end = nullptr;
    long n = std::strtol(spec.c_str() + 5, &end, 10);
    if (end == spec.c_str() + 5 || *end != '\0' || n < 0)
      throw CollectiveError("--device " + spec + ": expected cuda:N with N >= 0");
    if (n >= visible_gpus) throw CollectiveError("--device " + spec + " but this node has " + seen);
    return {true, static_cast<int>(n)};
  }
  throw CollectiveError("--device " + spec + ": unknown device (allowed: auto, cpu, cuda, cuda:N)");
}

double peak_rss_mb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;  // Linux reports KiB
}

}  // namespace hpctrain
