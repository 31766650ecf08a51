// Collective self-test: every operation and dtype across the world, values checked against
// closed forms. Used by `hpctrain doctor` and the MPI tests.
// The diag/ stage among the others, its threads and locks: docs/architecture.md.
#pragma once

#include <c10/core/Device.h>

#include <string>
#include <vector>

namespace hpctrain {

class Communicator;

struct SelfTestResult {
  std::string check;  // "allreduce sum float32 n=1000"
  bool ok = false;
  std::string detail;  // first mismatch when !ok
};

// Runs the self-test on tensors of `device`. Collective: every rank must call it.
std::vector<SelfTestResult> run_collective_selftest(Communicator& comm, c10::Device device);

}  // namespace hpctrain
