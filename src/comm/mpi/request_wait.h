// Waiting for a nonblocking MPI collective without pinning a core.
//
// Open MPI's blocking collectives (and MPI_Wait) spin in the progress engine at 100% CPU until
// the peers arrive. The comm thread shares its core with the rank's compute thread whenever
// ranks fill the cores (one rank per CPU slot), so a rank that reaches an allreduce first
// would take cycles from the backward pass it is meant to overlap, and from the other rank.
// wait_request polls instead: MPI_Test in a short hot loop (a collective whose peers are
// already there finishes without any sleep), then with sleeps that double up to a cap.
// Each MPI_Test also drives the collective's progress, so the cap bounds how long a
// multi-round collective can idle between rounds.
#pragma once

#include <mpi.h>

namespace hpctrain {

struct PollPolicy {
  double spin_us = 50;    // hot MPI_Test loop before the first sleep
  double max_sleep_us = 50;  // longest sleep between tests
  bool spin_only = false;    // MPI_Wait semantics (the old busy wait), for benchmarks
};

// The process-wide policy: defaults above, HPCTRAIN_COMM_POLL=spin selects spin_only,
// HPCTRAIN_COMM_POLL_MAX_US overrides max_sleep_us. Read once.
const PollPolicy& poll_policy();

// The policy for those two variables' values (null: unset). Throws hpctrain::Error naming the
// variable and the allowed values on a bad value.
PollPolicy parse_poll_policy(const char* mode, const char* max_us);

// Completes `req` (MPI_Test loop per the policy). Throws hpctrain::Error on an MPI error.
void wait_request(MPI_Request* req, const PollPolicy& policy = poll_policy());

}  // namespace hpctrain
