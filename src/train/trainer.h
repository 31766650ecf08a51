// Trainer: the main job behind `hpctrain train`.
//
// Contract:
// - Collective: every rank constructs a Trainer with the same config and calls run().
// - Everything a step touches lives on one device (the rank's choice, see runtime/device.h);
//   the first step checks it and reports a mismatch in one line naming the tensor and both
//   devices.
// - Every rank runs the same number of steps by construction: the sampler gives every rank
//   the same number of batches, max_steps and epochs are global, and the preemption flag is
//   agreed by an allreduce.
// - run() returns the summary object that rank 0 prints as its last stdout line.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "train/config.h"

namespace hpctrain {

class World;

class Trainer {
 public:
  Trainer(const TrainConfig& config, World& world);
  ~Trainer();
  nlohmann::json run();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace hpctrain
