// OptimConfig: the settings the optimizer stage reads, a plain struct so that optim/ depends on no
// stage above it. `hpctrain train` fills it from its TrainConfig (train/config.h: optim_config);
// library users fill it themselves. Field meanings and defaults are those of the flags of the same
// name (`hpctrain train --help`).
#pragma once

#include <cstdint>
#include <string>

namespace hpctrain {

struct OptimConfig {
  std::string optimizer = "sgd";  // sgd | adamw
  double lr = 0.05;
  double momentum = 0.9;  // SGD
  bool nesterov = false;  // SGD
  double weight_decay = 5e-4;
  std::string schedule = "cosine";  // constant | cosine | step | wsd (after warmup)
  int64_t warmup_steps = 0;
  int64_t step_size = 1000;  // schedule=step
  double gamma = 0.1;        // schedule=step
  double decay_frac = 0.2;   // schedule=wsd: the share of the steps that decays
  double min_lr = 0;         // cosine and wsd end here
  int64_t lr_ref_batch = 0;  // linear scaling rule: lr x global batch / this (0: off)
};

}  // namespace hpctrain
