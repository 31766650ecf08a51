// Model FLOPs utilization (MFU) of a training run: achieved model FLOP/s over the peak of the
// devices, for language models on token data.
//
// Contract:
// - setup_mfu (collective when it measures): on only for token data and a model that counts
//   its training FLOPs per token (Model::train_flops_per_token, e.g. gpt: 6N + 12LET, as its
//   start-up line says). The peak of the run is the world size x --peak-tflops when given;
//   else, on CPU, every rank measures its float32 GEMM rate at the same moment
//   (runtime/peak_flops.h: ranks that share cores share them here too) and the rates are summed
//   (one allgather); on a GPU without --peak-tflops it stays off (`why` says so).
// - mfu(tokens_per_s) = flops_per_token x tokens_per_s / peak (a fraction, 0.123 = 12.3%).
// - describe(): the start-up line: the peak, where it came from, the FLOPs per token.
#pragma once

#include <string>

namespace hpctrain {

class Communicator;
class Model;
struct DeviceChoice;
struct TrainConfig;

struct MfuMeter {
  double flops_per_token = 0;  // 0: MFU off
  double peak_flops = 0;       // FLOP/s of all ranks together
  std::string source;          // how the peak was found, or why MFU is off
  bool on() const { return flops_per_token > 0 && peak_flops > 0; }
  double mfu(double tokens_per_s) const { return on() ? flops_per_token * tokens_per_s / peak_flops : 0; }
  std::string describe() const;
};

MfuMeter setup_mfu(Model& model, const TrainConfig& cfg, const DeviceChoice& dev, bool token_data,
                   Communicator& comm);

}  // namespace hpctrain
