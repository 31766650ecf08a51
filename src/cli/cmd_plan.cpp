// `hpctrain plan --model M [--model-config C] --world N [--zero S]`: the model state per rank
// of each ZeRO stage (parameters, gradients, optimizer state, the largest gathered unit and the
// total), like DeepSpeed's estimator. gpt is sized from its config alone (model/gpt.h
// gpt_parameter_numels: nothing allocated, any size); other models are built once on the CPU
// (zoo and plugin models are small) for their parameter list. The figures: optim/memory_plan.h.
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "model/gpt.h"
#include "model/model_registry.h"
#include "optim/memory_plan.h"
#include "runtime/check.h"
#include "runtime/world.h"
#include "train/config.h"

namespace hpctrain {
namespace {

struct PlanArgs {
  std::string model = "gpt", model_config, optimizer = "adamw", amp = "off";
  std::vector<std::string> libs;
  int world = 0, zero = -1;
  int64_t vocab_size = 50257, seq_len = 1024, classes = 10;
  std::vector<int64_t> input_shape{1, 28, 28};
  double momentum = TrainConfig().momentum, bucket_mb = TrainConfig().bucket_mb;
  bool json = false;
};

// The trained parameters (name, elements) in model order; `vectors` gets those with fewer than
// two dimensions (gpt: its LayerNorms and biases).
std::vector<std::pair<std::string, int64_t>> parameter_list(const PlanArgs& a, std::set<std::string>& vectors) {
  ModelSpec spec;
  spec.name = a.model;
  spec.model_config = a.model_config;
  if (a.model == "gpt") {
    spec.vocab_size = spec.num_classes = a.vocab_size;
    spec.seq_len = a.seq_len;
    spec.sample_shape = {a.seq_len};
    auto out = gpt_parameter_numels(gpt_options(spec));
    for (const auto& [name, numel] : out)
      if (name.find(".ln_") != std::string::npos || name.ends_with(".bias")) vectors.insert(name);
    return out;
  }
  spec.sample_shape = a.input_shape;
  spec.num_classes = a.classes;
  ModelEntry e = resolve_model(a.model, a.libs);
  ModelPtr m = e.factory(spec);
  std::vector<std::pair<std::string, int64_t>> out;
  std::set<const void*> seen;  // tied weights count once
  for (auto& [name, p] : m->named_parameters())
    if (p.requires_grad() && seen.insert(p.data_ptr()).second) {
      out.emplace_back(name, p.numel());
      if (p.dim() < 2) vectors.insert(name);
    }
  return out;
}

std::string mib(int64_t b) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(b) / 1048576.0);
  return buf;
}

int plan(World& w, const PlanArgs& a) {
  if (a.world < 1) throw CollectiveError("plan: --world " + std::to_string(a.world) + " must be >= 1");
  std::vector<std::pair<std::string, int64_t>> params;
  MemoryPlanOptions o;
  try {
    for (const auto& lib : a.libs) load_model_library(lib);
    if (a.amp != "off" && a.amp != "bf16")
      throw CollectiveError("plan: --amp " + a.amp + " is not allowed (off|bf16; stage 3 runs on CPU ranks)");
    params = parameter_list(a, o.vectors);
    o.bf16_gather = a.amp == "bf16";
    o.world = a.world;
    o.optimizer_slots = optimizer_slots(a.optimizer, a.momentum);
    o.bucket_mb = a.bucket_mb;
  } catch (const CollectiveError&) {
    throw;
  } catch (const Error& e) {
    throw CollectiveError(e.what());
  }
  std::vector<StagePlan> stages = plan_memory(params, o);
  if (w.rank() != 0) return 0;
  int64_t p = 0;
  for (const auto& x : params) p += x.second;
  if (a.json) {
    std::printf("%s\n", nlohmann::json({{"model", a.model},
                                        {"parameters", p},
                                        {"world", a.world},
                                        {"optimizer", a.optimizer},
                                        {"amp", a.amp},
                                        {"optimizer_slots", o.optimizer_slots}})
                            .dump()
                            .c_str());
    for (const auto& s : stages)
      if (a.zero < 0 || a.zero == s.stage)
        std::printf("%s\n", nlohmann::json({{"stage", s.stage},
                                            {"parameters", s.parameters},
                                            {"gradients", s.gradients},
                                            {"optimizer_state", s.optimizer_state},
                                            {"largest_unit", s.largest_unit},
                                            {"largest_unit_name", s.largest_unit_name},
                                            {"padding", s.padding},
                                            {"total", s.total()}})
                                .dump()
                                .c_str());
    std::fflush(stdout);
    return 0;
  }
  std::printf(
      "hpctrain plan: model %s, %lld parameters, %d rank(s), optimizer %s (%d fp32 slot(s) per parameter), "
      "fp32 master weights; model state per rank (activations and buffers not included)\n",
      a.model.c_str(), static_cast<long long>(p), a.world, a.optimizer.c_str(), o.optimizer_slots);
  std::printf("%5s %14s %14s %16s %28s %14s\n", "stage", "parameters", "gradients", "optimizer state",
              "largest gathered unit", "total");
  for (const auto& s : stages) {
    if (a.zero >= 0 && a.zero != s.stage) continue;
    std::string unit = s.stage < 3 ? "none" : mib(s.largest_unit) + " (" + s.largest_unit_name + ")";
    std::printf("%5d %14s %14s %16s %28s %14s\n", s.stage, mib(s.parameters).c_str(), mib(s.gradients).c_str(),
                mib(s.optimizer_state).c_str(), unit.c_str(), mib(s.total()).c_str());
  }
  std::printf(
      "stage 2's gradients are the shard; during backward the buckets in flight (up to --bucket-mb "
      "each) come and go. Stage 3 gathers in %s; during a step the unit being computed and the "
      "prefetched next one are gathered at once (up to twice the largest unit).\n",
      o.bf16_gather ? "bf16 (the units' matrices; their vectors and the root in fp32)" : "fp32");
  std::fflush(stdout);
  return 0;
}

void add(CLI::App& root, Action& chosen) {
  auto* cmd = root.add_subcommand(
      "plan",
      "model state per rank for ZeRO stages 0-3 (parameters, gradients, optimizer state, largest gathered "
      "unit) without allocating the model");
  auto a = std::make_shared<PlanArgs>();
  cmd->add_option("--model", a->model,
                  "model: gpt (sized from its config alone), mlp|cnn|resnet, a plugin's model "
                  "or a TorchScript file (built once on the CPU)");
  cmd->add_option("--model-config", a->model_config, "gpt: n_layer=..,n_head=..,n_embd=..,bias=..");
  cmd->add_option("--world", a->world, "ranks (N)")->required();
  cmd->add_option("--zero", a->zero, "print only this stage (default: all)")->check(CLI::Range(0, 3));
  cmd->add_option("--optimizer", a->optimizer, "sgd|adamw (AdamW: 2 fp32 slots; SGD with momentum: 1)");
  cmd->add_option("--momentum", a->momentum, "SGD momentum (0: no slot)");
  cmd->add_option("--vocab-size", a->vocab_size, "gpt: vocabulary size");
  cmd->add_option("--seq-len", a->seq_len, "gpt: block size (--seq-len of the run)");
  cmd->add_option("--input-shape", a->input_shape, "other models: per-sample input shape")->delimiter(',');
  cmd->add_option("--classes", a->classes, "other models: number of classes");
  cmd->add_option("--amp", a->amp, "off|bf16: under bf16 stage 3 gathers its units in bf16, as a run does");
  cmd->add_option("--bucket-mb", a->bucket_mb, "DDP bucket cap in MiB (sets the padding)");
  cmd->add_option("--model-lib", a->libs, "model plugin LIB.so to load (repeatable)")->type_name("PATH");
  cmd->add_flag("--json", a->json, "one JSON object per line: the model, then one per stage");
  cmd->callback([&chosen, a] { chosen = [a](World& w) { return plan(w, *a); }; });
}

CommandRegistrar reg(47, add);

}  // namespace
}  // namespace hpctrain
