// Memory plan: the model state one rank holds under each ZeRO stage, in bytes, from the
// parameter list alone (names and element counts; nothing is allocated). `hpctrain plan` prints
// it; the trainer's start-up line measures the same figures from the run's tensors.
//
// Contract (fp32 parameters, P elements, N ranks, S optimizer slots: AdamW 2, SGD with momentum
// 1, plain SGD 0; buckets and padding exactly as DDP builds them, ddp/bucket_plan.h and
// ddp/zero_partition.h, so the figures equal what a run of the same model measures):
// - stage 0 (DDP): parameters 4P, gradients 4P (the bucket buffers), optimizer 4SP.
// - stage 1: parameters 4P' (P' = P padded per bucket to a multiple of N, the flat buckets),
//   gradients 4P' + 4P'/N (the full buckets and the reduced shard), optimizer 4SP'/N.
// - stage 2: parameters 4P', gradients 4P'/N (the shard; the buckets in flight during backward
//   come and go), optimizer 4SP'/N.
// - stage 3 (ddp/fsdp.h): each unit (a gpt block, else a top-level submodule; the root's own
//   parameters one more unit) padded to a multiple of N; parameters, gradients and optimizer
//   state are the fp32 shards of every unit, and largest_unit the largest unit gathered whole:
//   4 bytes per padded element, or with bf16_gather (--amp bf16, as a run gathers: ddp/fsdp.h)
//   2 per padded element plus 4 per element of its vectors (the `vectors`: parameters with
//   fewer than two dimensions); the root (gpt's "transformer", else "(root)") stays 4. During a
//   step the unit being computed and the prefetched one are both gathered.
// - largest_unit is 0 for stages 0-2 (they gather nothing); total = the four figures summed.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace hpctrain {

struct MemoryPlanOptions {
  int world = 1;
  int optimizer_slots = 2;                         // AdamW 2, SGD with momentum 1, SGD 0
  double bucket_mb = 25.0, first_bucket_mb = 1.0;  // DDP's defaults (ddp/ddp.h)
  bool bf16_gather = false;                        // --amp bf16: stage 3 gathers its units in bf16
  std::set<std::string> vectors;                   // parameters with fewer than two dimensions
};

struct StagePlan {
  int stage = 0;
  int64_t parameters = 0, gradients = 0, optimizer_state = 0, largest_unit = 0;
  std::string largest_unit_name;  // stage 3: the unit; "" otherwise
  int64_t padding = 0;            // zeros added to make equal shards (elements)
  int64_t total() const { return parameters + gradients + optimizer_state + largest_unit; }
};

// The unit a parameter belongs to under stage 3: "transformer.h.<i>" for a gpt block, else its
// top-level submodule (the name up to the first '.'), "(root)" for the root's own parameters.
std::string stage3_unit_of(const std::string& name);
// Whether stage3_unit_of's group is the root's (gathered in fp32 under bf16_gather too).
bool stage3_is_root(const std::string& unit);

// Stages 0-3, in order. `params`: the trained parameters in model order (name, elements).
// Throws hpctrain::Error for world < 1 or no parameters.
std::vector<StagePlan> plan_memory(const std::vector<std::pair<std::string, int64_t>>& params,
                                   const MemoryPlanOptions& opts);

// Slots per parameter of an optimizer: "adamw" 2, "sgd" 1 with momentum != 0 else 0; other
// names throw hpctrain::Error.
int optimizer_slots(const std::string& optimizer, double momentum);

}  // namespace hpctrain
