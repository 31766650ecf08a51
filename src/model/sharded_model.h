// --zero 3 behind the model interface: a Model whose forward gathers and releases its units'
// parameters through an FsdpEngine (ddp/fsdp.h).
//
// Contract of shard_model(inner, comm, opts) (collective):
// - The units are the inner model's (Model::set_unit_runner: gpt's transformer blocks, the zoo's
//   `features` and `classifier`); every trained parameter in no unit is the root unit. A model
//   without units is one unit: its root (said by ShardedModel::units() == 0).
// - The returned model forwards everything to `inner`; its forward gathers the root, runs the
//   units through the engine (FsdpEngine::run_unit) and hands the output to
//   FsdpEngine::end_forward. Between steps its parameters keep their shapes over released
//   storage: read them through the engine (gather_unit), not directly.
// - Frozen parameters (requires_grad false) stay whole on every rank, outside the engine.
// - A model built with its trained parameters on the meta device (ModelSpec::meta_parameters)
//   never exists whole: each parameter is replaced by the engine's CPU view (Model::set_parameter)
//   and its shard filled from Model::init_parameter, one parameter at a time, in named_parameters()
//   order (FsdpEngine::init_shards): no broadcast, every rank computes the same values from the seed.
#pragma once

#include <memory>

#include "comm/communicator.h"
#include "ddp/fsdp.h"
#include "model/model.h"

namespace hpctrain {

struct ShardedModel {
  ModelPtr model;
  std::shared_ptr<FsdpEngine> engine;
  int64_t units = 0;  // without the root
};

ShardedModel shard_model(ModelPtr inner, Communicator& comm, FsdpOptions opts = {});

}  // namespace hpctrain
