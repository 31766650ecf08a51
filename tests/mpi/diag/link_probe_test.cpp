// LinkProbe and probe_link over MPI with 1, 2 and 4 ranks (one machine: the hosts are given).
// Every rank whose ring neighbour is on another host gets a positive time; the others 0; a
// one-host job sends nothing. Collectives after the probes still agree (op order kept), and
// the probes are not counted as collective wait.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "comm/router.h"
#include "comm/run_ops.h"
#include "comm/guard/wait_meter.h"
#include "diag/link_probe.h"
#include "runtime/check.h"
#include "support/test_world.h"

using namespace hpctrain;
using hpctrain::testing::cpu_comm;
using hpctrain::testing::world;

namespace {

// Runs the probe with `hosts`, then checks the op stream is still in step with an allreduce.
double probe_with(const std::vector<std::string>& hosts) {
  LinkProbe p(hosts, world().rank(), link_prober(cpu_comm()) != nullptr);
  double t = p.run(cpu_comm());
  at::Tensor one = at::ones({1}, at::kDouble);
  cpu_comm().allreduce(one, ReduceOp::kSum)->wait();
  EXPECT_EQ(one.item<double>(), world().size());
  return t;
}

}  // namespace

TEST(LinkProbe, EveryHostBoundaryOfTheRingIsTimedOnce) {
  const int n = world().size(), r = world().rank();
  ASSERT_TRUE(link_prober(cpu_comm()) != nullptr);
  std::vector<std::string> each(n), pairs(n), one(n, "a");
  for (int k = 0; k < n; ++k) each[k] = "h" + std::to_string(k), pairs[k] = "h" + std::to_string(k / 2);
  CollectiveWaitMeter& meter = CollectiveWaitMeter::get();
  meter.enable(true);
  const uint64_t ops0 = meter.count();
  double t_each = probe_with(each);
  const uint64_t ops1 = meter.count();
  EXPECT_EQ(ops1 - ops0, 1u);  // the allreduce; the probe's ops are not collective wait
  double t_pairs = probe_with(pairs);
  double t_one = probe_with(one);
  meter.enable(false);
  EXPECT_EQ(t_one, 0);
  if (n == 1) {
    EXPECT_EQ(t_each, 0);
    return;
  }
  EXPECT_GT(t_each, 0);  // every rank's next rank is on another host
  EXPECT_LT(t_each, 5.0);
  const int next = (r + 1) % n;
  if (pairs[next] != pairs[r])
    EXPECT_GT(t_pairs, 0) << "rank " << r;
  else
    EXPECT_EQ(t_pairs, 0) << "rank " << r;
  LinkProbe p(pairs, r, true);
  EXPECT_EQ(p.to(), pairs[next] != pairs[r] ? next : -1);
}

TEST(LinkProbe, BadPeersAreRefusedBeforeAnyMessage) {
  EXPECT_THROW(link_prober(cpu_comm())->probe_link(world().rank(), -1, 1024, 1, nullptr), Error);
  EXPECT_THROW(link_prober(cpu_comm())->probe_link(world().size(), -1, 1024, 1, nullptr), Error);
  EXPECT_THROW(link_prober(cpu_comm())->probe_link(-1, -1, 0, 1, nullptr), Error);
}
