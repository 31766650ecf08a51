// StepStats::close_interval: one allreduce gives rank 0 the global mean loss and every rank's
// per-step timings (the metrics record's per_rank, TensorBoard's rank/<r>/...).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <chrono>
#include <thread>

#include "comm/guard/wait_meter.h"
#include "ddp/ddp.h"
#include "metrics/step_stats.h"
#include "support/test_world.h"

using namespace hpctrain;

TEST(StepStatsMpi, IntervalCarriesEveryRanksTimings) {
  auto& w = hpctrain::testing::world();
  const int r = w.rank(), n = w.size();
  StepStats s;
  s.start(0.0);
  DdpStepStats ddp;
  ddp.finalize_wait_s = 0.01 * (r + 1);  // rank r: blocked (r+1) * 10 ms per step
  for (int k = 0; k < 4; ++k) {
    s.add_loss(at::full({}, static_cast<double>(r)));  // loss r on rank r
    s.add_step(8, ddp);
  }
  s.set_data_wait(0.02 * r * 4);  // rank r: waited r * 20 ms per step for data
  IntervalReport iv = s.close_interval(hpctrain::testing::cpu_comm(), n);
  EXPECT_NEAR(iv.loss, (n - 1) / 2.0, 1e-12);  // mean of 0..n-1
  ASSERT_EQ(static_cast<int>(iv.ranks.size()), n);
  for (int k = 0; k < n; ++k) {
    EXPECT_NEAR(iv.ranks[k].comm_blocked_s, 0.01 * (k + 1), 1e-12) << "rank " << k;
    EXPECT_NEAR(iv.ranks[k].data_wait_s, 0.02 * k, 1e-12) << "rank " << k;
    EXPECT_GT(iv.ranks[k].step_s, 0) << "rank " << k;
  }
  nlohmann::json j = iv.per_rank_json();
  ASSERT_EQ(static_cast<int>(j.size()), n);
  EXPECT_DOUBLE_EQ(j[n - 1]["comm_blocked_s"].get<double>(), iv.ranks[n - 1].comm_blocked_s);
  // The next interval starts from zero on every rank.
  s.add_step(8, DdpStepStats{});
  IntervalReport next = s.close_interval(hpctrain::testing::cpu_comm(), n);
  for (int k = 0; k < n; ++k) EXPECT_EQ(next.ranks[k].comm_blocked_s, 0) << "rank " << k;
}

// A link probe run by close_interval (here: rank 0 busy 200 ms, the others idle) reaches every
// rank, and neither its time nor the others' wait for it in the allreduce lands in any
// interval's step time or collective wait (else the probing ranks would look slower to compute
// and the idle ones would look like they wait more: a false straggler).
TEST(StepStatsMpi, LinkProbeTimeCountsInNoInterval) {
  // No time limit: each figure is bounded by clock readings of the test itself around it
  // (steady_clock, one clock for every rank of this host), so a loaded machine cannot fail it
  // and the probe's 200 ms cannot hide in it.
  auto& w = hpctrain::testing::world();
  const int r = w.rank(), n = w.size();
  using clk = std::chrono::steady_clock;
  auto secs = [](clk::time_point t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); };
  CollectiveWaitMeter::get().enable(true);
  StepStats s;
  const double t_start = secs(clk::now());
  s.start(0.0);
  s.add_step(8, DdpStepStats{});
  double probe_start = 0, probe_end = 0;
  auto probe = [&] {
    probe_start = secs(clk::now());
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    probe_end = secs(clk::now());
    return r == 0 ? 0.2 : 0.0;
  };
  IntervalReport iv = s.close_interval(hpctrain::testing::cpu_comm(), n, probe);
  EXPECT_DOUBLE_EQ(iv.ranks[0].link_s, 0.2);
  for (int k = 1; k < n; ++k) EXPECT_EQ(iv.ranks[k].link_s, 0) << "rank " << k;
  // Rank 0's step time is measured before its probe started.
  if (r == 0) EXPECT_LE(iv.ranks[0].step_s, probe_start - t_start);
  // The next interval starts after rank 0's probe ended (the allreduce waits for it on every
  // rank): its step time and collective wait lie between that and the end of close_interval.
  MPI_Bcast(&probe_end, 1, MPI_DOUBLE, 0, w.mpi_comm());
  s.add_step(8, DdpStepStats{});
  IntervalReport next = s.close_interval(hpctrain::testing::cpu_comm(), n);
  const double t_end = secs(clk::now());
  CollectiveWaitMeter::get().enable(false);
  double bound = t_end - probe_end;  // this rank's bound; every rank checks every rank's split
  std::vector<double> bounds(n);
  MPI_Allgather(&bound, 1, MPI_DOUBLE, bounds.data(), 1, MPI_DOUBLE, w.mpi_comm());
  for (int k = 0; k < n; ++k) {
    EXPECT_LE(next.ranks[k].step_s, bounds[k]) << "rank " << k;
    EXPECT_LE(next.ranks[k].wait_s, bounds[k]) << "rank " << k;  // the 200 ms wait of ranks > 0 is not here
  }
}
