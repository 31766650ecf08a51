// run_guarded: MPI up, the program body, and the exit-code policy (CollectiveError: one line
// from rank 0, exit 2; anything else: the rank names itself, MPI_Abort, exit 1).
#include "runtime/guard.h"

#include <c10/util/Exception.h>

#include <cstdio>
#include <exception>
#include <string>

#include "runtime/check.h"
#include "runtime/world.h"

namespace hpctrain {

int run_guarded(int argc, char** argv, const std::function<int(World&)>& body) {
  World* world = nullptr;
  try {
    world = &World::init(&argc, &argv);
    int rc = body(*world);
    std::fflush(stdout);
    world->finalize();
    return rc;
  } catch (const CollectiveError& e) {
    int rank = world ? world->rank() : 0;
    if (World::initialized()) rank = World::get().rank();
    if (rank == 0) std::fprintf(stderr, "hpctrain: error: %s\n", e.what());
    std::fflush(stdout);
    std::fflush(stderr);
    if (World::initialized()) World::get().finalize();
    return 2;
  } catch (const std::exception& e) {
    int rank = World::initialized() ? World::get().rank() : 0;
    int size = World::initialized() ? World::get().size() : 1;
    // LibTorch errors carry a multi-line C++ backtrace: report their first line only.
    auto* c10e = dynamic_cast<const c10::Error*>(&e);
    std::string msg = c10e ? c10e->what_without_backtrace() : e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
    std::fprintf(stderr, "hpctrain: rank %d: error: %s\n", rank, msg.c_str());
    std::fflush(stderr);
    if (size > 1) World::get().abort(1);
    if (World::initialized()) World::get().finalize();
    return 1;
  }
}

}  // namespace hpctrain
