// Sharded (ZeRO-1/2) optimizer state in checkpoints <-> the per-parameter layout DDP runs save.
//
// A ZeRO-1 checkpoint holds, besides model/ and state/, optim/zero/r<k>.<slot> for every rank k
// of the saving run (rank k's flat shard of slot exp_avg, exp_avg_sq or momentum_buffer,
// ddp/zero_partition.h), optim/zero/step (AdamW's step count) and meta "zero" (the partition:
// world size, per bucket its parameters, padding and block size).
//
// A ZeRO-3 shard-only snapshot (train/snapshot_session.h) holds its rank's parameters the same
// way: zero3/r<k>.b<b>, rank k's block of unit b (the partition's bucket b: `block` fp32
// elements, padding zero; empty blocks are left out), with meta "param_shapes" (name -> shape)
// beside meta "zero"; the replicated model/ tensors (buffers, frozen parameters) stay as they are.
// Unsharding either kind cuts each parameter out of the buckets the ranks' blocks make up (one
// joiner for both).
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

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

// "zero3/r3.b5"
std::string zero_param_block_name(int rank, size_t bucket);

// True for rank `rank`'s own part of a sharded state: optim/zero/r<rank>.* and zero3/r<rank>.*.
bool is_rank_shard_tensor(const std::string& name, int rank);

// True when `st` holds sharded parameters (meta "param_shapes").
bool has_sharded_parameters(const CheckpointState& st);

// Local, no collective: replaces model/<param> of every parameter of `z` in `st` (their shapes
// go to meta "param_shapes") by this rank's blocks, `blocks[b]` of bucket b (aliased, not
// copied). Throws hpctrain::Error when a parameter of `z` has no model/ tensor in `st`.
void capture_parameter_blocks(CheckpointState& st, const ZeroPartition& z, int rank,
                              const std::vector<at::Tensor>& blocks);

// Replaces the parameter blocks of `st` by model/<param> (shaped as meta "param_shapes"
// records), drops "param_shapes" and keeps meta "zero" (the optimizer state stays sharded:
// unshard_optimizer_state, which needs the model/ tensors, comes after). A no-op without
// sharded parameters. Throws hpctrain::Error naming `source` when the record disagrees with the
// blocks (a rank's or unit's block missing or of the wrong size, a shape missing).
void unshard_parameters(CheckpointState& st, const std::string& source);

}  // namespace hpctrain
