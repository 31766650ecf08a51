// Model registry: named model factories from the zoo and from plugins (--model-lib LIB.so).
//
// Contract:
// - HPCTRAIN_REGISTER_MODEL("name", "one-line description", factory) at namespace scope in a
//   plugin (or program) registers `factory` (a ModelFactory, model/model.h) when the library is
//   loaded. The zoo registers mlp, cnn and resnet the same way.
// - load_model_library(path): dlopen()s a plugin once (RTLD_NOW: every symbol must resolve);
//   returns the names it registered. Errors are CollectiveErrors (every rank loads the same
//   file): "--model-lib PATH: does not exist" / "...: cannot be loaded: <dlerror()>" /
//   "...: registers no model (use HPCTRAIN_REGISTER_MODEL)". A name registered twice is an error
//   naming both origins.
// - resolve_model(name, libs): a name ending in .pt/.pth, or naming an existing file, is a
//   TorchScript module (model/torchscript_model.h). Otherwise loads `libs` in order, then finds
//   `name`: with libs given and the name not in them nor in the zoo, the error lists what each
//   library registers.
// - A plugin links against libhpctrain (target hpctrain::hpctrain); the process and the plugin
//   then share one registry.
#pragma once

#include <string>
#include <vector>

#include "model/model.h"

namespace hpctrain {

// Registers an entry (origin: the library being loaded, else "zoo"). Used by the macro.
void register_model(std::string name, std::string description, ModelFactory factory);
// (ModelEntry: model/model.h)

// All registered models, zoo first, then plugins in load order.
std::vector<ModelEntry> registered_models();

std::vector<std::string> load_model_library(const std::string& path);

ModelEntry resolve_model(const std::string& name, const std::vector<std::string>& libs);

struct ModelRegistrar {
  ModelRegistrar(const char* name, const char* description, ModelFactory factory) {
    register_model(name, description, std::move(factory));
  }
};

}  // namespace hpctrain

#define HPCTRAIN_CONCAT_INNER_(a, b) a##b
#define HPCTRAIN_CONCAT_(a, b) HPCTRAIN_CONCAT_INNER_(a, b)
#define HPCTRAIN_REGISTER_MODEL(name, description, factory) \
  static ::hpctrain::ModelRegistrar HPCTRAIN_CONCAT_(hpctrain_model_registrar_, __LINE__)(name, description, factory)
