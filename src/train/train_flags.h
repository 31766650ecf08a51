// The `hpctrain train` flags on a CLI11 app: --config plus one flag per config field
// (config_fields()), shared by the CLI and parse_train_command_line. Private to libhpctrain and
// the CLI (CLI11 is not part of the installed interface).
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <memory>
#include <string>

namespace hpctrain {

struct TrainFlags {
  std::string config;
  std::map<std::string, std::string> raw;  // key -> flag value as typed (lists: comma-joined)
};

// Adds the flags to `app`; parsed values land in `*flags`.
void add_train_flags(CLI::App& app, const std::shared_ptr<TrainFlags>& flags);

}  // namespace hpctrain
