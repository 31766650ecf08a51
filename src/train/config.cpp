// TrainConfig from defaults, environment, TOML and flags: parsing, validation and the pairings
// check, all driven by the one field list in config.h.
#include "train/config.h"

#include <toml++/toml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <type_traits>

#include "model/torchscript_model.h"
#include "runtime/check.h"

namespace hpctrain {
namespace {

using json = nlohmann::json;

template <class T>
constexpr FieldKind kind_of() {
  if constexpr (std::is_same_v<T, bool>)
    return FieldKind::kBool;
  else if constexpr (std::is_integral_v<T>)
    return FieldKind::kInt;
  else if constexpr (std::is_floating_point_v<T>)
    return FieldKind::kFloat;
  else if constexpr (std::is_same_v<T, std::string>)
    return FieldKind::kString;
  else
    return FieldKind::kStringList;
}

std::vector<std::string> split_choices(const std::string& s) {
  std::vector<std::string> out;
  size_t p = 0;
  while (!s.empty() && p <= s.size()) {
    size_t e = s.find('|', p);
    if (e == std::string::npos) e = s.size();
    out.push_back(s.substr(p, e - p));
    p = e + 1;
  }
  return out;
}

// What --help shows as the value: the field's own label, its choices, or its type.
std::string label_of(FieldKind k, const std::string& label, const std::vector<std::string>& choices) {
  if (!label.empty()) return label;
  if (!choices.empty()) {
    std::string s = "{";
    for (const auto& c : choices) s += (s.size() > 1 ? "," : "") + c;
    return s + "}";
  }
  switch (k) {
    case FieldKind::kInt: return "INT";
    case FieldKind::kFloat: return "FLOAT";
    case FieldKind::kBool: return "BOOL";
    default: return "TEXT";
  }
}

std::string default_text_of(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string s;
    for (const auto& e : v) s += (s.empty() ? "" : ",") + e.get<std::string>();
    return s;
  }
  if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() && std::fabs(v.get<double>()) < 1e15)
    return std::to_string(static_cast<int64_t>(v.get<double>()));  // 300, not 300.0
  return v.dump();
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
      if (c.empty())
        free_text = true;
      else
        allowed += (allowed.empty() ? "" : "|") + c;
      ok = ok || c == s;
    }
    if (!ok && !free_text) throw CollectiveError(where + " = \"" + s + "\" is not allowed (allowed: " + allowed + ")");
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
      if (end == s || *end || errno)
        throw CollectiveError(where + " expects " + kind_name(f.kind) + ", got \"" + raw + "\"");
      return json(static_cast<int64_t>(v));
    }
    case FieldKind::kFloat: {
      double v = std::strtod(s, &end);
      if (end == s || *end || errno)
        throw CollectiveError(where + " expects " + kind_name(f.kind) + ", got \"" + raw + "\"");
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
  static const std::vector<FieldSpec> fields = [] {
    const json defaults = TrainConfig().to_json();
    std::vector<FieldSpec> v;
#define HPCTRAIN_FIELD_SPEC(type_, name_, def_, label_, choices_, lo_, hi_, excl_, help_)                   \
  {                                                                                                         \
    FieldSpec f{#name_, kind_of<type_>(), help_, split_choices(choices_), double(lo_), double(hi_), excl_}; \
    f.label = label_of(f.kind, label_, f.choices);                                                          \
    f.default_text = default_text_of(defaults[#name_]);                                                     \
    v.push_back(std::move(f));                                                                              \
  }
    HPCTRAIN_CONFIG_FIELDS(HPCTRAIN_FIELD_SPEC)
#undef HPCTRAIN_FIELD_SPEC
    return v;
  }();
  return fields;
}

std::string flag_of(const std::string& key) {
  std::string f = "--" + key;
  for (auto& c : f)
    if (c == '_') c = '-';
  return f;
}

void check_pairings(const TrainConfig& c) {
  if (c.data.empty()) throw CollectiveError("no data directory: pass --data DIR (or data = \"DIR\" in the config)");
  if (c.grad_accum > 1 && c.batch_size % c.grad_accum != 0)
    throw CollectiveError("--batch-size " + std::to_string(c.batch_size) + " is not divisible by --grad-accum " +
                          std::to_string(c.grad_accum));
  if (c.zero >= 1 && c.optimizer != "sgd" && c.optimizer != "adamw")
    throw CollectiveError("--zero " + std::to_string(c.zero) + " with --optimizer " + c.optimizer +
                          ": no sharded implementation of that optimizer (sgd and adamw have one)");
  if (c.sync_bn && is_torchscript_name(c.model))
    throw CollectiveError("--sync-bn cannot convert the BatchNorm layers of the TorchScript module " + c.model +
                          ": its compiled forward calls them directly, and converting in Python before scripting "
                          "is not possible either (torch.nn.SyncBatchNorm needs a Python process group); train it "
                          "without --sync-bn (rank 0's statistics are broadcast), or use GroupNorm/LayerNorm");
}

CommSettings comm_settings(const TrainConfig& c) {
  CommSettings s;
  s.collective_timeout_s = c.collective_timeout;
  s.debug_collectives = c.debug_collectives;
  s.allreduce = parse_allreduce_algo(c.allreduce);
  return s;
}

TrainConfig load_config(const std::string& toml_path, const std::map<std::string, std::string>& flags) {
  json j = TrainConfig().to_json();
  // The environment sits between the defaults and the file (flags > TOML > env > defaults).
  const CommSettings env = CommSettings::from_env();
  j["collective_timeout"] = env.collective_timeout_s;
  j["debug_collectives"] = env.debug_collectives;
  validate(*find_field("collective_timeout"), j["collective_timeout"], "HPCTRAIN_COLLECTIVE_TIMEOUT");
  if (!toml_path.empty()) {
    if (!std::filesystem::exists(toml_path)) throw CollectiveError("config file " + toml_path + " does not exist");
    toml::table tbl;
    try {
      tbl = toml::parse_file(toml_path);
    } catch (const toml::parse_error& e) {
      const auto& src = e.source();
      throw CollectiveError("config file " + toml_path + " is not valid TOML (line " + std::to_string(src.begin.line) +
                            "): " + std::string(e.description()));
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
  check_pairings(c);
  return c;
}

nlohmann::json TrainConfig::to_json() const {
  json j;
#define HPCTRAIN_FIELD_TO_JSON(type, name, ...) j[#name] = name;
  HPCTRAIN_CONFIG_FIELDS(HPCTRAIN_FIELD_TO_JSON)
#undef HPCTRAIN_FIELD_TO_JSON
  return j;
}

TrainConfig TrainConfig::from_json(const nlohmann::json& j) {
  TrainConfig c;
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!find_field(it.key()))
      throw CollectiveError("config key " + it.key() + " is not a known key (known: " + all_keys() + ")");
#define HPCTRAIN_FIELD_FROM_JSON(type, name, ...)                                                    \
  if (j.contains(#name)) {                                                                           \
    try {                                                                                            \
      j.at(#name).get_to(c.name);                                                                    \
    } catch (const nlohmann::json::exception&) {                                                     \
      throw CollectiveError("config key " #name " = " + j.at(#name).dump() + " has the wrong type"); \
    }                                                                                                \
  }
  HPCTRAIN_CONFIG_FIELDS(HPCTRAIN_FIELD_FROM_JSON)
#undef HPCTRAIN_FIELD_FROM_JSON
  return c;
}

OptimConfig optim_config(const TrainConfig& c) {
  OptimConfig o;
  o.optimizer = c.optimizer;
  o.lr = c.lr;
  o.momentum = c.momentum;
  o.nesterov = c.nesterov;
  o.weight_decay = c.weight_decay;
  o.schedule = c.schedule;
  o.warmup_steps = c.warmup_steps;
  o.step_size = c.step_size;
  o.gamma = c.gamma;
  o.decay_frac = c.decay_frac;
  o.min_lr = c.min_lr;
  o.lr_ref_batch = c.lr_ref_batch;
  return o;
}

}  // namespace hpctrain
