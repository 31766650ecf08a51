// Test helpers shared by the MPI test binaries: the World and a communicator, created once.
#pragma once

#include "comm/router.h"
#include "runtime/world.h"

namespace hpctrain::testing {

World& world();
// The process-wide CPU communicator for tests (MPI backend).
Communicator& cpu_comm();
// True on GPU-less machines; GPU tests call GTEST_SKIP() with a message when so.
bool no_gpu();

}  // namespace hpctrain::testing
