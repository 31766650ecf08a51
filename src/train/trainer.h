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
// - The model comes from the registry by config.model (the zoo, or plugins named by
//   config.model_lib), or from a program's own factory. Either way the trainer sees only the
//   model interface (model/model.h): the factory is called on every rank with the data's shape,
//   the model is moved to the run's device, every parameter and buffer must then be there (else
//   a CollectiveError naming the tensor), and the output of a zero batch of the data's shape
//   (eval mode, no grad: no side effects) must fit the targets (a CollectiveError with both
//   shapes), all before any file is written or any step taken.
// - Checkpoints record the model name and its origin ("zoo", the plugin's path, or "program"),
//   so `hpctrain eval` can rebuild it or name what is missing.
// - run() returns the summary object that rank 0 prints as its last stdout line.
// The train/ stage among the others, its threads and locks: docs/architecture.md.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "model/model_registry.h"
#include "train/config.h"

namespace hpctrain {

class World;

class Trainer {
 public:
  // The model named by config.model, from the zoo or config.model_lib's plugins.
  Trainer(const TrainConfig& config, World& world);
  // A program's own model: `model.factory` builds it, `model.name` is recorded in checkpoints
  // and the summary (origin "program" unless set).
  Trainer(const TrainConfig& config, World& world, ModelEntry model);
  ~Trainer();
  nlohmann::json run();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// The whole trainer for a program's own model, in one call (collective): builds a Trainer with
// `factory` (config.model names it in checkpoints) and runs it. Returns the summary; a
// preempted run returns {"preempted": true, ...} after its checkpoint: exit with
// kPreemptedExitCode (train/preempt.h) so the launcher requeues it.
nlohmann::json train(World& world, const TrainConfig& config, ModelFactory factory);

}  // namespace hpctrain
