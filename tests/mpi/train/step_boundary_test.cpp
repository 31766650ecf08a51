// train/step_boundary.h: every field is summed over ranks in one agreement, the same total on
// every rank; a flag raised on one rank only is seen by all.
#include <gtest/gtest.h>

#include "support/test_world.h"
#include "train/step_boundary.h"

using namespace hpctrain;

TEST(StepBoundary, SumsEveryFieldOverRanks) {
  auto& w = hpctrain::testing::world();
  const int r = w.rank(), n = w.size();
  BoundaryVotes mine;
  mine.preempt = r == n - 1 ? 1 : 0;  // the last rank alone was signalled
  mine.ckpt_error = 0;
  mine.ckpt_pending = r + 1;
  mine.snapshot_busy = r == 0 ? 1 : 0;  // rank 0's snapshot write is in flight: every rank skips
  BoundaryVotes all = agree_at_boundary(hpctrain::testing::cpu_comm(), mine);
  EXPECT_EQ(all.preempt, 1) << "rank " << r;
  EXPECT_EQ(all.ckpt_error, 0) << "rank " << r;
  EXPECT_EQ(all.ckpt_pending, int64_t{n} * (n + 1) / 2) << "rank " << r;
  EXPECT_EQ(all.snapshot_busy, 1) << "rank " << r;
}

TEST(StepBoundary, NothingToSayGivesZeros) {
  BoundaryVotes all = agree_at_boundary(hpctrain::testing::cpu_comm(), BoundaryVotes{});
  EXPECT_EQ(all.preempt + all.ckpt_error + all.ckpt_pending + all.snapshot_busy, 0);
}
