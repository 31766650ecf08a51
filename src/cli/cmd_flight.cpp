// `hpctrain flight DIR`: merges the flight recorder's dumps of a job (rank 0 reads the files)
// and prints the report of diag/flight_report.h.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "diag/flight_report.h"
#include "runtime/agree.h"
#include "runtime/world.h"

namespace hpctrain {
namespace {

void add(CLI::App& root, Action& chosen) {
  auto* cmd = root.add_subcommand("flight", "read the flight recorder's dumps of a job: where it hung, who is missing");
  auto dir = std::make_shared<std::string>();
  cmd->add_option("dir", *dir, "checkpoint or run directory with flight/rank-<r>.json, or that flight/ directory")
      ->required()
      ->type_name("DIR");
  cmd->callback([&chosen, dir] {
    chosen = [dir](World& w) {
      run_on_rank0(w.mpi_comm(), "flight", [&] {
        std::fputs(flight_report(*dir).c_str(), stdout);
        std::fflush(stdout);
      });
      return 0;
    };
  });
}

CommandRegistrar reg(65, add);

}  // namespace
}  // namespace hpctrain
