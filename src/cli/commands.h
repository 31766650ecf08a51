// Subcommand registry: each cli/cmd_*.cpp registers a function that adds its subcommand to
// the root app and, when that subcommand is chosen, stores the action to run inside the
// guarded MPI world. Registration is by static object, so adding a command touches one file.
// The cli/ stage among the others, its threads and locks: docs/architecture.md.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <vector>

namespace hpctrain {
class World;
using Action = std::function<int(World&)>;
using AddCommand = void (*)(CLI::App& root, Action& chosen);

struct CommandRegistrar {
  CommandRegistrar(int order, AddCommand add);
};
// Registered commands, by `order` (the order `hpctrain --help` lists them).
std::vector<AddCommand> registered_commands();
}  // namespace hpctrain
