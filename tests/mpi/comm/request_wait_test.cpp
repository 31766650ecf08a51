// wait_request: a rank waiting for late peers must not burn its core (the compute thread shares
// it), and the policy variables are validated.
#include <gtest/gtest.h>

#include <mpi.h>
#include <time.h>

#include <chrono>
#include <thread>

#include "comm/mpi/request_wait.h"
#include "runtime/check.h"
#include "support/test_world.h"

using namespace hpctrain;
using hpctrain::testing::world;

namespace {

double thread_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double wall_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

TEST(RequestWait, WaitingForALatePeerSleepsInsteadOfSpinning) {
  if (world().size() < 2) GTEST_SKIP() << "needs a late peer (>= 2 ranks)";
  PollPolicy sleep_policy;  // defaults: 50 us hot loop, then sleeps up to 50 us
  for (int round = 0; round < 3; ++round) {
    MPI_Barrier(world().comm());
    if (world().rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    MPI_Request req;
    HPC_MPI_CHECK(MPI_Ibarrier(world().comm(), &req));
    double c0 = thread_cpu_s(), w0 = wall_s();
    wait_request(&req, sleep_policy);
    double cpu = thread_cpu_s() - c0, wall = wall_s() - w0;
    if (world().rank() != 0) {
      // ~200 ms waited; a spinning wait would use ~all of it as CPU time.
      EXPECT_GT(wall, 0.1) << "round " << round;
      EXPECT_LT(cpu, 0.25 * wall) << "round " << round << ": " << cpu << " s CPU in " << wall << " s";
    }
  }
}

TEST(RequestWait, SpinPolicyCompletesToo) {
  PollPolicy spin;
  spin.spin_only = true;
  MPI_Request req;
  int v = world().rank() + 1, sum = 0;
  HPC_MPI_CHECK(MPI_Iallreduce(&v, &sum, 1, MPI_INT, MPI_SUM, world().comm(), &req));
  wait_request(&req, spin);
  int n = world().size();
  EXPECT_EQ(sum, n * (n + 1) / 2);
}

TEST(RequestWait, PolicyVariablesAreValidated) {
  EXPECT_FALSE(parse_poll_policy(nullptr, nullptr).spin_only);
  EXPECT_TRUE(parse_poll_policy("spin", nullptr).spin_only);
  EXPECT_FALSE(parse_poll_policy("sleep", nullptr).spin_only);
  EXPECT_DOUBLE_EQ(parse_poll_policy(nullptr, "200").max_sleep_us, 200.0);
  try {
    parse_poll_policy("busy", nullptr);
    FAIL() << "accepted HPCTRAIN_COMM_POLL=busy";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("HPCTRAIN_COMM_POLL must be spin or sleep"), std::string::npos);
  }
  for (const char* bad : {"0", "abc", "1e9", "5us"})
    EXPECT_THROW(parse_poll_policy(nullptr, bad), Error) << bad;
}
