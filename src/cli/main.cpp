// hpctrain: the command-line client of libhpctrain. Parsing happens inside the MPI world so
// that a bad flag is reported once (rank 0) and every rank exits with code 2.
#include <algorithm>
#include <iostream>
#include <map>
#include <utility>

#include "cli/commands.h"
#include "comm/guard/flight_recorder.h"
#include "hpctrain_version.h"
#include "runtime/build_id.h"
#include "runtime/check.h"
#include "runtime/guard.h"
#include "runtime/threads.h"
#include "runtime/world.h"

namespace hpctrain {
namespace {
std::multimap<int, AddCommand>& registry() {
  static std::multimap<int, AddCommand> r;
  return r;
}
}  // namespace
CommandRegistrar::CommandRegistrar(int order, AddCommand add) { registry().emplace(order, add); }
std::vector<AddCommand> registered_commands() {
  std::vector<AddCommand> v;
  for (auto& [order, add] : registry()) v.push_back(add);
  return v;
}
}  // namespace hpctrain

int main(int argc, char** argv) {
  return hpctrain::run_guarded(argc, argv, [&](hpctrain::World& world) -> int {
    // SIGUSR2 asks `train`'s flight recorder for a dump: no command is killed by it.
    hpctrain::FlightRecorder::catch_dump_signal();
    CLI::App app{"hpctrain: data-parallel training on LibTorch for MPI clusters"};
    app.set_version_flag("--version", HPCTRAIN_VERSION);
    app.require_subcommand(1);
    // Every option's --help line shows its default (subcommands inherit option_defaults).
    app.option_defaults()->always_capture_default();
    hpctrain::Action chosen;
    for (auto add : hpctrain::registered_commands()) add(app, chosen);
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
      if (world.rank() == 0) app.exit(e);
      return 0;
    } catch (const CLI::CallForAllHelp& e) {
      if (world.rank() == 0) app.exit(e);
      return 0;
    } catch (const CLI::CallForVersion&) {
      if (world.rank() == 0) std::cout << HPCTRAIN_VERSION << "\n";
      return 0;
    } catch (const CLI::ParseError& e) {
      std::string msg = e.what();
      // CLI11 reports "A subcommand is required" for a misspelled one: name the word instead.
      if (argc > 1 && argv[1][0] != '-') {
        std::string known;
        bool found = false;
        auto all = [](const CLI::App*) { return true; };
        for (const CLI::App* sub : std::as_const(app).get_subcommands(all)) {
          known += (known.empty() ? "" : ", ") + sub->get_name();
          found = found || sub->check_name(argv[1]);
        }
        if (!found) msg = std::string("unknown subcommand \"") + argv[1] + "\" (known: " + known + ")";
      }
      throw hpctrain::CollectiveError(msg + " (see hpctrain --help)");
    }
    // Every host must run the same build; a stale one fails here, naming itself, not mid-run.
    if (world.size() > 1) hpctrain::check_same_build(world);
    hpctrain::configure_compute_threads(world);
    return chosen(world);
  });
}
