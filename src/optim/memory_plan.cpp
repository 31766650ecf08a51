// plan_memory: the per-rank model state of each ZeRO stage from DDP's own bucket plan and ZeRO
// partition (the same functions a run uses), so the plan equals the run's measured figures.
#include "optim/memory_plan.h"

#include <algorithm>
#include <map>

#include "ddp/bucket_plan.h"
#include "ddp/zero_partition.h"
#include "runtime/check.h"

namespace hpctrain {

std::string stage3_unit_of(const std::string& name) {
  const std::string block = "transformer.h.";
  if (name.rfind(block, 0) == 0) {
    size_t end = name.find('.', block.size());
    return name.substr(0, end);
  }
  size_t dot = name.find('.');
  return dot == std::string::npos ? "(root)" : name.substr(0, dot);
}

bool stage3_is_root(const std::string& unit) { return unit == "(root)" || unit == "transformer"; }

int optimizer_slots(const std::string& optimizer, double momentum) {
  if (optimizer == "adamw") return 2;
  if (optimizer == "sgd") return momentum != 0 ? 1 : 0;
  throw Error("plan: unknown optimizer " + optimizer + " (sgd or adamw)");
}

std::vector<StagePlan> plan_memory(const std::vector<std::pair<std::string, int64_t>>& params,
                                   const MemoryPlanOptions& o) {
  if (o.world < 1) throw Error("plan: --world " + std::to_string(o.world) + " must be >= 1");
  if (params.empty()) throw Error("plan: the model has no parameters to train");
  const int64_t f32 = 4, slots = o.optimizer_slots, n = o.world;
  std::vector<ParamSpec> specs;
  int64_t p = 0;
  for (const auto& [name, numel] : params) {
    specs.push_back({name, numel, f32, "float", "cpu"});
    p += numel;
  }
  BucketPlan plan = make_bucket_plan(specs, static_cast<int64_t>(o.bucket_mb * 1048576.0),
                                     static_cast<int64_t>(o.first_bucket_mb * 1048576.0));
  ZeroPartition z = make_zero_partition(plan, specs, o.world);
  const int64_t padded = z.param_numel() + z.padding(), shard = z.shard_numel();

  std::vector<StagePlan> out(4);
  for (int s = 0; s < 4; ++s) out[s].stage = s;
  out[0].parameters = out[0].gradients = f32 * p;
  out[0].optimizer_state = slots * f32 * p;
  for (int s = 1; s <= 2; ++s) {
    out[s].parameters = f32 * padded;
    out[s].gradients = f32 * shard + (s == 1 ? f32 * padded : 0);
    out[s].optimizer_state = slots * f32 * shard;
    out[s].padding = z.padding();
  }
  // Stage 3: units in first-seen order, each padded to a multiple of the world size.
  std::vector<std::string> order;
  std::map<std::string, int64_t> units, vectors;
  for (const auto& [name, numel] : params) {
    std::string u = stage3_unit_of(name);
    if (!units.count(u)) order.push_back(u);
    units[u] += numel;
    if (o.vectors.count(name)) vectors[u] += numel;
  }
  StagePlan& s3 = out[3];
  int64_t shard3 = 0;
  for (const auto& u : order) {
    const int64_t pad = (units[u] + n - 1) / n * n;
    shard3 += pad / n;
    s3.padding += pad - units[u];
    // What a run's unit holds gathered (FsdpEngine::largest_unit_bytes).
    const int64_t gathered = o.bf16_gather && !stage3_is_root(u) ? 2 * pad + f32 * vectors[u] : f32 * pad;
    if (gathered > s3.largest_unit) {
      s3.largest_unit = gathered;
      s3.largest_unit_name = u;
    }
  }
  s3.parameters = s3.gradients = f32 * shard3;
  s3.optimizer_state = slots * f32 * shard3;
  return out;
}

}  // namespace hpctrain
