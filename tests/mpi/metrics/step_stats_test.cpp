// StepStats::close_interval: one allreduce gives rank 0 the global mean loss and every rank's
// per-step timings (the metrics record's per_rank, TensorBoard's rank/<r>/...).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <chrono>
#include <thread>

#include "comm/wait_meter.h"
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
  auto& w = hpctrain::testing::world();
  const int r = w.rank(), n = w.size();
  CollectiveWaitMeter::get().enable(true);
  StepStats s;
  s.start(0.0);
  s.add_step(8, DdpStepStats{});
  auto probe = [r] {
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return r == 0 ? 0.2 : 0.0;
  };
  IntervalReport iv = s.close_interval(hpctrain::testing::cpu_comm(), n, probe);
  EXPECT_DOUBLE_EQ(iv.ranks[0].link_s, 0.2);
  for (int k = 1; k < n; ++k) EXPECT_EQ(iv.ranks[k].link_s, 0) << "rank " << k;
  EXPECT_LT(iv.ranks[0].step_s, 0.1);
  s.add_step(8, DdpStepStats{});
  IntervalReport next = s.close_interval(hpctrain::testing::cpu_comm(), n);
  CollectiveWaitMeter::get().enable(false);
  for (int k = 0; k < n; ++k) {
    EXPECT_LT(next.ranks[k].step_s, 0.1) << "rank " << k;
    EXPECT_LT(next.ranks[k].wait_s, 0.1) << "rank " << k;  // the 200 ms wait of ranks > 0 is not here
  }
}
