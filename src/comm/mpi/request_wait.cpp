#include "comm/mpi/request_wait.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

#include "runtime/check.h"

namespace hpctrain {
PollPolicy parse_poll_policy(const char* mode, const char* cap) {
  PollPolicy p;
  if (mode) {
    std::string m = mode;
    if (m == "spin") p.spin_only = true;
    else if (m != "sleep" && !m.empty())
      throw Error("HPCTRAIN_COMM_POLL must be spin or sleep, got \"" + m + "\"");
  }
  if (cap) {
    char* end = nullptr;
    double v = std::strtod(cap, &end);
    if (end == cap || *end != '\0' || v < 1 || v > 100000)
      throw Error(std::string("HPCTRAIN_COMM_POLL_MAX_US must be a number in [1, 100000], got \"") +
                  cap + "\"");
    p.max_sleep_us = v;
  }
  return p;
}

const PollPolicy& poll_policy() {
  static const PollPolicy policy =
      parse_poll_policy(std::getenv("HPCTRAIN_COMM_POLL"), std::getenv("HPCTRAIN_COMM_POLL_MAX_US"));
  return policy;
}

void wait_request(MPI_Request* req, const PollPolicy& policy) {
  if (policy.spin_only) {
    HPC_MPI_CHECK(MPI_Wait(req, MPI_STATUS_IGNORE));
    return;
  }
  using clock = std::chrono::steady_clock;
  const auto spin_until = clock::now() + std::chrono::duration<double, std::micro>(policy.spin_us);
  int done = 0;
  double sleep_us = 1;
  for (;;) {
    HPC_MPI_CHECK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    if (clock::now() < spin_until) continue;
    timespec ts{0, static_cast<long>(sleep_us * 1000)};
    nanosleep(&ts, nullptr);
    sleep_us = std::min(sleep_us * 2, policy.max_sleep_us);
  }
}

}  // namespace hpctrain
