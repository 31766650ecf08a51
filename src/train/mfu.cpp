// setup_mfu: the model's FLOPs per token, then the peak: --peak-tflops x ranks, or every CPU
// rank's GEMM rate summed over an allgather.
#include "train/mfu.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdio>
#include <vector>

#include "comm/communicator.h"
#include "model/model.h"
#include "runtime/device.h"
#include "runtime/peak_flops.h"
#include "train/config.h"

namespace hpctrain {

std::string MfuMeter::describe() const {
  if (!on()) return "MFU off: " + source;
  char buf[320];
  std::snprintf(buf, sizeof buf, "MFU against a peak of %.4g TFLOP/s (%s), %.4g MFLOPs per token", peak_flops / 1e12,
                source.c_str(), flops_per_token / 1e6);
  return buf;
}

MfuMeter setup_mfu(Model& model, const TrainConfig& cfg, const DeviceChoice& dev, bool token_data,
                   Communicator& comm) {
  MfuMeter m;
  if (!token_data) {
    m.source = "not token data";
    return m;
  }
  m.flops_per_token = model.train_flops_per_token();
  if (m.flops_per_token <= 0) {
    m.source = "model " + cfg.model + " does not count its FLOPs per token";
    return m;
  }
  const int ranks = comm.size();
  char buf[200];
  if (cfg.peak_tflops > 0) {
    m.peak_flops = cfg.peak_tflops * 1e12 * ranks;
    std::snprintf(buf, sizeof buf, "--peak-tflops %g per rank x %d rank(s)", cfg.peak_tflops, ranks);
    m.source = buf;
    return m;
  }
  if (dev.cuda) {
    m.flops_per_token = 0;
    m.source = "pass --peak-tflops (the GPU's peak for the training dtype, e.g. 989 for an H100's bf16)";
    return m;
  }
  at::Tensor mine = at::full({1}, measure_cpu_gemm_flops(), at::kDouble);
  std::vector<at::Tensor> parts{mine};
  if (ranks > 1) comm.allgather(mine, &parts, "mfu.peak")->wait();
  for (const auto& t : parts) m.peak_flops += t.item<double>();
  std::snprintf(buf, sizeof buf, "measured: float32 GEMM 512^3 on each of %d rank(s) at start, %d thread(s) each",
                ranks, at::get_num_threads());
  m.source = buf;
  return m;
}

}  // namespace hpctrain
