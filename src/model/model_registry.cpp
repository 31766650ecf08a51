// The registry is one process-wide list guarded by a mutex. A plugin's static registrars run
// inside dlopen(); `g_loading` tells register_model which library they belong to.
#include "model/model_registry.h"

#include <dlfcn.h>

#include <filesystem>
#include <map>
#include <mutex>

#include "model/torchscript_model.h"
#include "runtime/check.h"

namespace hpctrain {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<ModelEntry> entries;
  std::map<std::string, std::vector<std::string>> loaded;  // canonical path -> names
  std::string loading;                                     // library inside dlopen(), or ""
  std::vector<std::string> errors;                         // duplicate names seen while loading
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

}  // namespace

void register_model(std::string name, std::string description, ModelFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  std::string origin = r.loading.empty() ? "zoo" : r.loading;
  for (const auto& e : r.entries)
    if (e.name == name) {
      r.errors.push_back("model \"" + name + "\" from " + origin + " is already registered by " + e.origin);
      return;
    }
  // A plugin's own Model that lists a shared tensor twice gets it listed once (model.h).
  ModelFactory untied = [f = std::move(factory)](const ModelSpec& spec) { return untie_names(f(spec)); };
  r.entries.push_back({std::move(name), std::move(description), origin, std::move(untied)});
}

std::vector<ModelEntry> registered_models() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  return r.entries;
}

std::vector<std::string> load_model_library(const std::string& path) {
  const std::string where = "--model-lib " + path;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw CollectiveError(where + ": does not exist");
  if (std::filesystem::is_directory(path, ec)) throw CollectiveError(where + ": is a directory, not a shared library");
  std::string canon = std::filesystem::canonical(path, ec).string();
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lk(r.mu);
    if (auto it = r.loaded.find(canon); it != r.loaded.end()) return it->second;
    r.loading = canon;
    r.errors.clear();
  }
  size_t before = registered_models().size();
  // A path without '/' would make dlopen search the library path instead of this file.
  std::string open_path = path.find('/') == std::string::npos ? "./" + path : path;
  void* handle = dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::vector<std::string> names, errors;
  {
    std::lock_guard<std::mutex> lk(r.mu);
    r.loading.clear();
    errors.swap(r.errors);
    for (size_t i = before; i < r.entries.size(); ++i) names.push_back(r.entries[i].name);
    if (handle) r.loaded[canon] = names;
  }
  if (!handle) {
    const char* why = dlerror();
    throw CollectiveError(where + ": cannot be loaded: " + (why ? why : "unknown dlopen error"));
  }
  if (!errors.empty()) throw CollectiveError(where + ": " + join(errors, "; "));
  if (names.empty())
    throw CollectiveError(where +
                          ": registers no model (a plugin registers its models with "
                          "HPCTRAIN_REGISTER_MODEL, see model/model_registry.h)");
  return names;
}

ModelEntry resolve_model(const std::string& name, const std::vector<std::string>& libs) {
  if (is_torchscript_name(name)) return torchscript_entry(name);
  std::vector<std::pair<std::string, std::vector<std::string>>> per_lib;
  for (const auto& lib : libs) per_lib.emplace_back(lib, load_model_library(lib));
  std::vector<std::string> zoo;
  for (const auto& e : registered_models()) {
    if (e.name == name) return e;
    if (e.origin == "zoo") zoo.push_back(e.name);
  }
  std::string msg = "unknown model \"" + name + "\"";
  if (per_lib.empty()) {
    msg += " (zoo: " + join(zoo) + "; a plugin's models need --model-lib LIB.so";
    msg += ")";
  } else {
    msg += ": ";
    std::vector<std::string> parts;
    for (const auto& [lib, names] : per_lib) parts.push_back(lib + " registers " + join(names));
    msg += join(parts, "; ") + "; the zoo has " + join(zoo);
  }
  throw CollectiveError(msg);
}

}  // namespace hpctrain
