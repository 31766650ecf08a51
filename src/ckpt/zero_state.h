// Sharded (ZeRO-1/2) optimizer state in checkpoints <-> the per-parameter layout DDP runs save.
//
// A ZeRO-1 checkpoint holds, besides model/ and state/, optim/zero/r<k>.<slot> for every rank k
// of the saving run (rank k's flat shard of slot exp_avg, exp_avg_sq or momentum_buffer,
// ddp/zero_partition.h), optim/zero/step (AdamW's step count) and meta "zero" (the partition:
// world size, per bucket its parameters, padding and block size).
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

#include "ckpt/checkpoint.h"
#include "ddp/zero_partition.h"

namespace hpctrain {

// "optim/zero/r3.exp_avg"
std::string zero_shard_name(int rank, const std::string& slot);
constexpr const char* kZeroStepTensor = "optim/zero/step";

// True when `st` holds sharded optimizer state (meta "zero").
bool has_sharded_optimizer_state(const CheckpointState& st);

// Replaces the sharded optimizer tensors of `st` by per-parameter ones, optim/<param>.<slot>
// shaped like model/<param> (and optim/<param>.step), and drops meta "zero" (recorded as
// "zero_saved_world_size"). A no-op without sharded state. Throws hpctrain::Error naming
// `source` when the partition record disagrees with the shards (missing or extra ranks, wrong
// sizes, unknown parameters).
void unshard_optimizer_state(CheckpointState& st, const std::string& source);

// The inverse for one rank: from per-parameter entries optim/<param>.<slot> of `st`, this
// rank's flat shard of each slot under `partition` (padding zero). Slots absent for every
// parameter are absent from the result; a slot present for some parameters only is an error.
std::map<std::string, at::Tensor> shard_optimizer_state(const CheckpointState& st, const ZeroPartition& partition,
                                                        int rank, const std::string& source);

}  // namespace hpctrain
