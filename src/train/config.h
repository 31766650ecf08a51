// TrainConfig: every setting of `hpctrain train`, from a TOML file and command-line flags.
//
// Contract:
// - One table of fields (config_fields()) drives the TOML keys (snake_case), the flags
//   (--kebab-case), the types, the allowed values and the help text, so they cannot drift.
// - Flags override the file. Unknown keys, wrong types and out-of-range values are
//   CollectiveErrors naming the key and the allowed values; they are raised before any rank
//   touches data or devices, and every rank reaches the same verdict (same inputs).
// - to_json() is the effective configuration, printed by rank 0 and stored with every
//   checkpoint and metrics file.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hpctrain {

struct TrainConfig {
  std::string model = "cnn";             // a zoo or plugin model name (hpctrain models)
  std::vector<std::string> model_lib;    // plugins to load (--model-lib, repeatable)
  std::string loss = "cross_entropy";   // cross_entropy (labels) | mse | l1 | smooth_l1 (float targets)
  std::string targets_key = "targets";  // the float target dataset of a regression file
  std::string data;
  int64_t epochs = 1;
  int64_t max_steps = 0;  // 0: no limit
  int64_t batch_size = 64;  // per rank
  double lr = 0.05;
  std::string optimizer = "sgd";
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 5e-4;
  std::string schedule = "cosine";  // constant | cosine | step
  int64_t warmup_steps = 0;
  int64_t step_size = 1000;  // for schedule = step
  double gamma = 0.1;
  int64_t lr_ref_batch = 0;  // linear scaling rule: lr * global_batch / lr_ref_batch (0: off)
  double clip_grad_norm = 0;  // 0: off
  int64_t grad_accum = 1;
  int64_t zero = 0;  // ZeRO stage: 0 (DDP) or 1 (sharded optimizer state)
  std::string device = "auto";
  bool sync_bn = false;
  std::string amp = "off";  // off | bf16 | fp16
  double bucket_mb = 25;
  int64_t prefetch = 2;
  int64_t data_in_memory_mb = 512;  // a data file up to this size is read whole (0: per batch)
  bool augment = false;
  std::string ckpt_dir;
  int64_t ckpt_every = 0;  // steps; 0: only at the end (when ckpt_dir is set)
  int64_t ckpt_keep = 0;   // 0: keep all
  int64_t ckpt_shard_mb = 512;
  bool ckpt_async = true;
  bool ckpt_compress = false;
  std::string ckpt_writers = "rank0";  // rank0 | all
  std::string resume = "auto";         // auto | none | PATH
  int64_t seed = 0;
  std::string metrics;  // FILE.jsonl
  std::string trace;    // FILE.json (Chrome trace)
  std::string tensorboard;  // DIR for TensorBoard event files
  int64_t log_every = 50;
  double collective_timeout = 300;
  bool debug_collectives = false;
  double straggler_threshold = 0.05;  // report a rank costing > this x step time (0: off)

  nlohmann::json to_json() const;
  static TrainConfig from_json(const nlohmann::json& j);  // validated values only
};

// kStringList: a TOML array of strings (or one string); a flag that may be repeated, each value
// also split at commas.
enum class FieldKind { kInt, kFloat, kBool, kString, kStringList };

struct FieldSpec {
  std::string key;   // snake_case TOML key; the flag is --key with '_' -> '-'
  FieldKind kind;
  std::string help;
  std::vector<std::string> choices;  // for strings with a fixed set ("" entry = free text)
  double min = -1e300, max = 1e300;  // inclusive range for numbers
  bool min_exclusive = false;
};

const std::vector<FieldSpec>& config_fields();

// Builds the configuration: defaults, then the TOML file (if non-empty), then `flags`
// (key -> raw string from the command line). Throws CollectiveError on any problem.
TrainConfig load_config(const std::string& toml_path,
                        const std::map<std::string, std::string>& flags);

}  // namespace hpctrain
