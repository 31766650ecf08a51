// run_guarded: MPI up, the program body, and the exit-code policy (CollectiveError: one line
// from rank 0, exit 2; anything else: the rank names itself, MPI_Abort with the error's exit
// code from runtime/exit_codes.h).
#include "runtime/guard.h"

#include <c10/util/Exception.h>

#include <cstdio>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "runtime/check.h"
#include "runtime/error_line.h"
#include "runtime/exit_codes.h"
#include "runtime/world.h"

namespace hpctrain {
namespace {

std::mutex g_hooks_mu;
std::vector<std::function<void(const std::string&)>> g_hooks;

void run_fatal_hooks(const std::string& what) {
  std::vector<std::function<void(const std::string&)>> hooks;
  {
    std::lock_guard<std::mutex> lk(g_hooks_mu);
    hooks = g_hooks;
  }
  for (auto& h : hooks) try {
      h(what);
    } catch (...) {
    }
}

// Which exit code an error that ends one rank gets (runtime/exit_codes.h): the launchers
// restart only the curable ones.
int exit_code_of(const std::exception& e) {
  if (dynamic_cast<const InputError*>(&e)) return kExitBadInput;
  if (dynamic_cast<const CommError*>(&e)) return kExitCommFailed;
  if (dynamic_cast<const std::bad_alloc*>(&e) || dynamic_cast<const c10::OutOfMemoryError*>(&e))
    return kExitOutOfMemory;
  return kExitFailed;
}

}  // namespace

void add_fatal_error_hook(std::function<void(const std::string& what)> hook) {
  std::lock_guard<std::mutex> lk(g_hooks_mu);
  g_hooks.push_back(std::move(hook));
}

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
    if (rank == 0) std::fprintf(stderr, "hpctrain: error: %s\n", error_line(e).c_str());
    std::fflush(stdout);
    std::fflush(stderr);
    if (World::initialized()) World::get().finalize();
    return dynamic_cast<const DivergedError*>(&e) ? kExitDiverged : kExitBadInput;
  } catch (const std::exception& e) {
    int rank = World::initialized() ? World::get().rank() : 0;
    int size = World::initialized() ? World::get().size() : 1;
    // LibTorch errors carry a multi-line C++ backtrace: report their first line only.
    const std::string msg = error_line(e);
    run_fatal_hooks(msg);
    std::fprintf(stderr, "hpctrain: rank %d: error: %s\n", rank, msg.c_str());
    std::fflush(stderr);
    const int code = exit_code_of(e);
    if (size > 1) World::get().abort(code);
    if (World::initialized()) World::get().finalize();
    return code;
  }
}

}  // namespace hpctrain
