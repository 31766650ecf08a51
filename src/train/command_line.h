// parse_train_command_line: the flags and TOML config of `hpctrain train`, for programs with
// their own model (examples/custom_model), parsed by the library exactly as the CLI does.
//
// Contract (collective in effect: every rank parses the same argv and reaches the same result):
// - Accepts --config FILE.toml and one --flag per TrainConfig field (`hpctrain train --help`
//   lists them); flags override the file.
// - --help: rank 0 prints the usage; returns nullopt on every rank (exit 0).
// - A bad flag, key, type or value: CollectiveError with one line naming it (run_guarded turns
//   that into one message from rank 0 and exit code 2).
#pragma once

#include <optional>
#include <string>

#include "train/config.h"

namespace hpctrain {

class World;

std::optional<TrainConfig> parse_train_command_line(World& world, int argc, const char* const* argv,
                                                    const std::string& description);

}  // namespace hpctrain
