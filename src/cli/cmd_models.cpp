// `hpctrain models [--model-lib LIB ...]`: the models `train --model` accepts, one per line:
// name, then its origin (zoo or the plugin) and a short description.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "model/model_registry.h"
#include "runtime/world.h"

namespace hpctrain {
namespace {

int models(World& w, const std::vector<std::string>& libs) {
  for (const auto& lib : libs) load_model_library(lib);
  if (w.rank() != 0) return 0;
  for (const auto& e : registered_models())
    std::printf("%-12s %s [%s]\n", e.name.c_str(), e.description.c_str(), e.origin.c_str());
  std::fflush(stdout);
  return 0;
}

void add(CLI::App& root, Action& chosen) {
  auto* cmd = root.add_subcommand("models", "list the models train --model accepts (zoo and plugins)");
  auto libs = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--model-lib", *libs, "model plugin LIB.so to load (repeatable)")->type_name("PATH");
  cmd->callback([&chosen, libs] { chosen = [libs](World& w) { return models(w, *libs); }; });
}

CommandRegistrar reg(45, add);

}  // namespace
}  // namespace hpctrain
