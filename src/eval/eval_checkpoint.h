// evaluate_checkpoint: `hpctrain eval` as a library call, for the CLI and for programs with
// their own model.
//
// Contract (collective: every rank calls it with the same request):
// - Reads and verifies the checkpoint (a step directory, a checkpoint root or ROOT/latest, or a
//   merged .h5/.pt) on every rank, rebuilds its model and evaluates DATA/test.h5, each test
//   sample counted once whatever the world size.
// - The model: `factory` when given (a program's own model); else `model` when given (a zoo or
//   plugin name, or a TorchScript file); else the one the checkpoint names (the zoo, a plugin
//   from `model_lib`, or the TorchScript module stored in the checkpoint itself). A checkpoint whose model came from
//   a plugin that is not loaded is a CollectiveError naming the library to pass; one written
//   by a program with its own factory names that.
// - Returns {"world_size","device","ckpt","model","step","test_loss","test_accuracy",
//   "samples","wall_s"}, the object rank 0 prints as its last stdout line.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model.h"

namespace hpctrain {

class World;

struct EvalRequest {
  std::string ckpt;
  std::string data;                    // directory with test.h5
  std::string device = "auto";         // auto|cpu|cuda|cuda:N
  int64_t batch_size = 256;            // per rank
  std::vector<std::string> model_lib;  // plugins to load first
  std::string model;                   // the model to load the weights into; "" = the one the checkpoint names
};

nlohmann::json evaluate_checkpoint(World& world, const EvalRequest& req, ModelFactory factory = {});

}  // namespace hpctrain
