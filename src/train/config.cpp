#include "train/config.h"

#include <toml++/toml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "runtime/check.h"

namespace hpctrain {
namespace {

using json = nlohmann::json;

std::string flag_of(const std::string& key) {
  std::string f = "--" + key;
  for (auto& c : f)
    if (c == '_') c = '-';
  return f;
}

std::string kind_name(FieldKind k) {
  switch (k) {
    case FieldKind::kInt: return "an integer";
    case FieldKind::kFloat: return "a number";
    case FieldKind::kBool: return "true or false";
    case FieldKind::kString: return "a string";
    case FieldKind::kStringList: return "a string or an array of strings";
  }
  return "?";
}

// Checks range and choices of an already typed value.
void validate(const FieldSpec& f, const json& v, const std::string& where) {
  if (f.kind == FieldKind::kInt || f.kind == FieldKind::kFloat) {
    double x = v.get<double>();
    bool low = f.min_exclusive ? x <= f.min : x < f.min;
    if (low || x > f.max || !std::isfinite(x)) {
      std::string range = std::string(f.min_exclusive ? "> " : ">= ") + json(f.min).dump();
      if (f.max < 1e300) range += " and <= " + json(f.max).dump();
      throw CollectiveError(where + " = " + v.dump() + " is out of range: must be " + range);
    }
  }
  if (f.kind == FieldKind::kString && !f.choices.empty()) {
    std::string s = v.get<std::string>();
    bool free_text = false, ok = false;
    std::string allowed;
    for (auto& c : f.choices) {
      if (c.empty()) free_text = true;
      else allowed += (allowed.empty() ? "" : "|") + c;
      ok = ok || c == s;
    }
    if (!ok && !free_text)
      throw CollectiveError(where + " = \"" + s + "\" is not allowed (allowed: " + allowed + ")");
  }
}

json parse_flag(const FieldSpec& f, const std::string& raw) {
  std::string where = flag_of(f.key);
  const char* s = raw.c_str();
  char* end = nullptr;
  errno = 0;
  switch (f.kind) {
    case FieldKind::kInt: {
      long long v = std::strtoll(s, &end, 10);
      if (end == s || *end || errno) throw CollectiveError(where + " expects " + kind_name(f.kind) + ", got \"" + raw + "\"");
      return json(static_cast<int64_t>(v));
    }
    case FieldKind::kFloat: {
      double v = std::strtod(s, &end);
      if (end == s || *end || errno) throw CollectiveError(where + " expects " + kind_name(f.kind) + ", got \"" + raw + "\"");
      return json(v);
    }
    case FieldKind::kBool:
      if (raw == "true" || raw == "1" || raw.empty()) return json(true);
      if (raw == "false" || raw == "0") return json(false);
      throw CollectiveError(where + " expects true or false, got \"" + raw + "\"");
    case FieldKind::kString: return json(raw);
    case FieldKind::kStringList: {
      json list = json::array();
      size_t p = 0;
      while (p <= raw.size()) {
        size_t e = raw.find(',', p);
        if (e == std::string::npos) e = raw.size();
        if (e > p) list.push_back(raw.substr(p, e - p));
        p = e + 1;
      }
      return list;
    }
  }
  return json();
}

json from_toml(const FieldSpec& f, const toml::node& n, const std::string& where) {
  switch (f.kind) {
    case FieldKind::kInt:
      if (auto v = n.value_exact<int64_t>()) return json(*v);
      break;
    case FieldKind::kFloat:
      if (auto v = n.value_exact<double>()) return json(*v);
      if (auto v = n.value_exact<int64_t>()) return json(static_cast<double>(*v));
      break;
    case FieldKind::kBool:
      if (auto v = n.value_exact<bool>()) return json(*v);
      break;
    case FieldKind::kString:
      if (auto v = n.value_exact<std::string>()) return json(*v);
      break;
    case FieldKind::kStringList:
      if (auto v = n.value_exact<std::string>()) return json::array({*v});
      if (const toml::array* a = n.as_array()) {
        json list = json::array();
        for (const auto& item : *a) {
          auto v = item.value_exact<std::string>();
          if (!v) throw CollectiveError(where + " must be " + kind_name(f.kind));
          list.push_back(*v);
        }
        return list;
      }
      break;
  }
  throw CollectiveError(where + " must be " + kind_name(f.kind));
}

const FieldSpec* find_field(const std::string& key) {
  for (auto& f : config_fields())
    if (f.key == key) return &f;
  return nullptr;
}

std::string all_keys() {
  std::string s;
  for (auto& f : config_fields()) s += (s.empty() ? "" : ", ") + f.key;
  return s;
}

}  // namespace

const std::vector<FieldSpec>& config_fields() {
  using K = FieldKind;
  static const std::vector<FieldSpec> fields = {
      {"model", K::kString, "model name: mlp|cnn|resnet or a plugin's (hpctrain models lists them)"},
      {"model_lib", K::kStringList, "model plugin LIB.so to load (repeatable)"},
      {"loss", K::kString, "training loss: cross_entropy (integer labels) | mse | l1 | smooth_l1 (float targets)",
       {"cross_entropy", "mse", "l1", "smooth_l1"}},
      {"targets_key", K::kString, "dataset of float targets for regression losses"},
      {"data", K::kString, "directory with train.h5 and test.h5, or numbered train-00000.h5... and test-00000.h5..."},
      {"epochs", K::kInt, "epochs to train", {}, 1, 1e9},
      {"max_steps", K::kInt, "stop after this many optimizer steps (0: no limit)", {}, 0, 1e12},
      {"batch_size", K::kInt, "per-rank batch size", {}, 1, 1e9},
      {"lr", K::kFloat, "learning rate", {}, 0, 1e6, true},
      {"optimizer", K::kString, "sgd|adamw", {"sgd", "adamw"}},
      {"momentum", K::kFloat, "SGD momentum", {}, 0, 1},
      {"nesterov", K::kBool, "Nesterov momentum (SGD)"},
      {"weight_decay", K::kFloat, "weight decay", {}, 0, 1e6},
      {"schedule", K::kString, "LR schedule after warmup: constant|cosine|step", {"constant", "cosine", "step"}},
      {"warmup_steps", K::kInt, "linear warmup steps", {}, 0, 1e12},
      {"step_size", K::kInt, "steps between decays (schedule=step)", {}, 1, 1e12},
      {"gamma", K::kFloat, "decay factor (schedule=step)", {}, 0, 1, true},
      {"lr_ref_batch", K::kInt, "linear scaling rule reference batch (0: off)", {}, 0, 1e12},
      {"clip_grad_norm", K::kFloat, "clip gradients to this global norm (0: off)", {}, 0, 1e12},
      {"grad_accum", K::kInt, "micro-batches per optimizer step", {}, 1, 1e6},
      {"zero", K::kInt, "ZeRO stage: 0 = DDP (replicated optimizer), 1 = optimizer state sharded over ranks", {}, 0, 3},
      {"device", K::kString, "auto|cpu|cuda|cuda:N"},
      {"sync_bn", K::kBool, "convert BatchNorm to SyncBatchNorm"},
      {"amp", K::kString, "mixed precision: off|bf16|fp16", {"off", "bf16", "fp16"}},
      {"bucket_mb", K::kFloat, "DDP bucket cap in MiB", {}, 0, 1e6, true},
      {"prefetch", K::kInt, "batches prefetched by the loader thread", {}, 0, 1024},
      {"data_in_memory_mb", K::kInt, "read a data file whole into memory at its first batch when it is at most this many MiB (512 in all per process; 0: read every batch from the file)", {}, 0, 1 << 20},
      {"augment", K::kBool, "random crop + flip augmentation"},
      {"ckpt_dir", K::kString, "checkpoint directory (empty: no checkpoints)"},
      {"ckpt_every", K::kInt, "checkpoint every N steps (0: only at the end)", {}, 0, 1e12},
      {"ckpt_keep", K::kInt, "keep the newest K checkpoints (0: all)", {}, 0, 1e9},
      {"ckpt_shard_mb", K::kInt, "max shard size in MiB", {}, 1, 1e9},
      {"ckpt_async", K::kBool, "write checkpoints in the background"},
      {"ckpt_compress", K::kBool, "gzip-compress checkpoint shards"},
      {"ckpt_writers", K::kString, "rank0|all", {"rank0", "all"}},
      {"resume", K::kString, "auto: continue from the newest checkpoint in --ckpt-dir when there is one (a reused directory resumes); none: start fresh; PATH: that checkpoint"},
      {"seed", K::kInt, "seed for every generator", {}, 0, 9.2e18},
      {"metrics", K::kString, "write JSON lines metrics to this file"},
      {"trace", K::kString, "write a Chrome-trace timeline to this file"},
      {"tensorboard", K::kString, "write TensorBoard event files to this directory (rank 0)"},
      {"log_every", K::kInt, "progress/metrics interval in steps", {}, 1, 1e12},
      {"collective_timeout", K::kFloat, "seconds before a stuck collective aborts the job (0: watchdog off, as HPCTRAIN_COLLECTIVE_TIMEOUT=0)", {}, 0, 1e9},
      {"debug_collectives", K::kBool, "compare collective fingerprints across ranks"},
      {"straggler_threshold", K::kFloat, "name a rank that costs the job more than this share of the step time (0: off)", {}, 0, 1},
  };
  return fields;
}

TrainConfig load_config(const std::string& toml_path,
                        const std::map<std::string, std::string>& flags) {
  json j = TrainConfig().to_json();
  if (!toml_path.empty()) {
    if (!std::filesystem::exists(toml_path))
      throw CollectiveError("config file " + toml_path + " does not exist");
    toml::table tbl;
    try {
      tbl = toml::parse_file(toml_path);
    } catch (const toml::parse_error& e) {
      const auto& src = e.source();
      throw CollectiveError("config file " + toml_path + " is not valid TOML (line " +
                            std::to_string(src.begin.line) + "): " + std::string(e.description()));
    }
    for (auto&& [k, node] : tbl) {
      std::string key(k.str());
      const FieldSpec* f = find_field(key);
      std::string where = toml_path + ": " + key;
      if (!f) throw CollectiveError(where + " is not a known key (known: " + all_keys() + ")");
      json v = from_toml(*f, node, where);
      validate(*f, v, where);
      j[key] = v;
    }
  }
  for (auto& [key, raw] : flags) {
    const FieldSpec* f = find_field(key);
    if (!f) throw CollectiveError("unknown option " + flag_of(key));
    json v = parse_flag(*f, raw);
    validate(*f, v, flag_of(key));
    j[key] = v;
  }
  TrainConfig c = TrainConfig::from_json(j);
  if (c.data.empty()) throw CollectiveError("no data directory: pass --data DIR (or data = \"DIR\" in the config)");
  if (c.grad_accum > 1 && c.batch_size % c.grad_accum != 0)
    throw CollectiveError("--batch-size " + std::to_string(c.batch_size) + " is not divisible by --grad-accum " +
                          std::to_string(c.grad_accum));
  if (c.zero >= 2)
    throw CollectiveError("--zero " + std::to_string(c.zero) + ": ZeRO stage " + std::to_string(c.zero) +
                          (c.zero == 2 ? " (sharded gradients)" : " (sharded parameters)") +
                          " is not built; --zero 1 shards the optimizer state");
  return c;
}

#define HPC_CONFIG_FIELDS(X)                                                               \
  X(model) X(model_lib) X(loss) X(targets_key) X(data) X(epochs) X(max_steps) X(batch_size) X(lr) X(optimizer) X(momentum)     \
  X(nesterov) X(weight_decay) X(schedule) X(warmup_steps) X(step_size) X(gamma)            \
  X(lr_ref_batch) X(clip_grad_norm) X(grad_accum) X(zero) X(device) X(sync_bn) X(amp) X(bucket_mb) \
  X(prefetch) X(data_in_memory_mb) X(augment) X(ckpt_dir) X(ckpt_every) X(ckpt_keep) X(ckpt_shard_mb)           \
  X(ckpt_async) X(ckpt_compress) X(ckpt_writers) X(resume) X(seed) X(metrics) X(trace)     \
  X(tensorboard) X(log_every) X(collective_timeout) X(debug_collectives)        \
  X(straggler_threshold)

nlohmann::json TrainConfig::to_json() const {
  json j;
#define X(name) j[#name] = name;
  HPC_CONFIG_FIELDS(X)
#undef X
  return j;
}

TrainConfig TrainConfig::from_json(const nlohmann::json& j) {
  TrainConfig c;
#define X(name) \
  if (j.contains(#name)) j.at(#name).get_to(c.name);
  HPC_CONFIG_FIELDS(X)
#undef X
  return c;
}

}  // namespace hpctrain
