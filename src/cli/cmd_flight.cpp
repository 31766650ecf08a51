// `hpctrain flight DIR [--job ID]`: merges the flight recorder's dumps of a job (the newest in
// DIR, or ID; rank 0 reads the files) and prints the report of diag/flight_report.h.
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
  auto job = std::make_shared<std::string>();
  cmd->add_option("dir", *dir,
                  "checkpoint or run directory (its flight/<job>/rank-<r>.json), its flight/ directory, or one "
                  "job's directory")
      ->required()
      ->type_name("DIR");
  cmd->add_option("--job", *job,
                  "the job to report on (its id, as the report lists the jobs in DIR: a restarted or shrunk run "
                  "is a new job); default: the newest")
      ->type_name("ID");
  cmd->callback([&chosen, dir, job] {
    chosen = [dir, job](World& w) {
      run_on_rank0(w.mpi_comm(), "flight", [&] {
        std::fputs(flight_report(*dir, *job).c_str(), stdout);
        std::fflush(stdout);
      });
      return 0;
    };
  });
}

CommandRegistrar reg(65, add);

}  // namespace
}  // namespace hpctrain
