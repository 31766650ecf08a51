// Watchdog side channel and desync detection under 1, 2 and 4 ranks. The timeout -> report ->
// MPI_Abort path ends the job, so it is covered by tests/e2e/test_watchdog_*.sh instead.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <chrono>
#include <thread>

#include "comm/mpi/mpi_communicator.h"
#include "comm/guard/op_guard.h"
#include "comm/guard/watchdog.h"
#include "runtime/check.h"
#include "support/test_world.h"

using namespace hpctrain;
using hpctrain::testing::world;

namespace {

OpInfo op(uint64_t seq, std::string tag) {
  OpInfo i;
  i.op = "allreduce";
  i.dtype = "float32";
  i.numel = 16;
  i.seq = seq;
  i.tag = std::move(tag);
  return i;
}

void barrier() { HPC_MPI_CHECK(MPI_Barrier(world().mpi_comm())); }

}  // namespace

// Every rank's progress arrives over the side channel, answered by the peers' watchdog
// threads while their main threads are busy elsewhere (here: sleeping, then in a barrier).
TEST(Watchdog, SideChannelReportsEveryRanksProgress) {
  Watchdog wd(world().mpi_comm(), 60);
  auto& lane = wd.add_lane("mpi");
  const int r = world().rank(), n = world().size();
  set_current_step(100 + r);  // process-wide (comm/guard/op_guard.h): one rank per process here
  for (int s = 1; s <= r + 1; ++s) lane.begin(op(s, "t" + std::to_string(s)));
  lane.end(r);  // rank r has finished ops 1..r, op r+1 is still running
  barrier();
  std::vector<std::optional<PeerStatus>> all;
  if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // others ask first
  all = wd.query_peers(20.0);
  ASSERT_EQ(static_cast<int>(all.size()), n);
  for (int p = 0; p < n; ++p) {
    ASSERT_TRUE(all[p].has_value()) << "rank " << p << " did not answer";
    EXPECT_EQ(all[p]->rank, p);
    ASSERT_EQ(all[p]->lanes, 1);
    const LaneStatus& l = all[p]->lane[0];
    EXPECT_EQ(l.started, static_cast<uint64_t>(p + 1));
    EXPECT_EQ(l.finished, static_cast<uint64_t>(p));
    EXPECT_EQ(l.step, 100 + p);
    EXPECT_EQ(describe(l.last), "allreduce(float32, 16) #" + std::to_string(p + 1) + " from t" + std::to_string(p + 1));
  }
  barrier();  // no rank tears its watchdog down while another may still ask it
}

TEST(Watchdog, CommunicatorFeedsTheLaneWithSeqStepAndEnd) {
  CommSettings s;
  s.collective_timeout_s = 60;
  MpiCommunicator comm(world().mpi_comm(), s);
  ASSERT_NE(comm.watchdog(), nullptr);
  set_current_step(7);
  at::Tensor t = at::ones({16});
  comm.allreduce(t, ReduceOp::kSum, "probe")->wait();
  comm.barrier("end")->wait();
  LaneStatus l = comm.watchdog()->own_status().lane[0];
  EXPECT_EQ(l.started, 2u);
  EXPECT_EQ(l.finished, 2u);
  EXPECT_EQ(l.step, 7);
  EXPECT_EQ(describe(l.last), "barrier(none, 0) #2 from end");
  EXPECT_TRUE(at::equal(t, at::full({16}, static_cast<float>(world().size()))));
}

TEST(Watchdog, OffWhenTimeoutIsZero) {
  CommSettings s;
  s.collective_timeout_s = 0;
  MpiCommunicator comm(world().mpi_comm(), s);
  EXPECT_EQ(comm.watchdog(), nullptr);
  comm.barrier("b")->wait();
}

// A rank slower than the others by less than the timeout is not a hang.
TEST(Watchdog, SlowRankWithinTheDeadlineIsNotReported) {
  CommSettings s;
  s.collective_timeout_s = 3;
  MpiCommunicator comm(world().mpi_comm(), s);
  at::Tensor t = at::ones({4});
  if (world().rank() == world().size() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  comm.allreduce(t, ReduceOp::kSum, "slow")->wait();
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));  // idle longer than the timeout
  comm.barrier("after")->wait();
  EXPECT_EQ(t[0].item<float>(), world().size());
}

TEST(DebugCollectives, MatchingOpsPassAndADesyncFailsEveryRankTheSameWay) {
  CommSettings s;
  s.collective_timeout_s = 60;
  s.debug_collectives = true;
  MpiCommunicator comm(world().mpi_comm(), s);
  at::Tensor t = at::ones({4});
  comm.allreduce(t, ReduceOp::kSum, "same")->wait();
  EXPECT_EQ(t[0].item<float>(), world().size());
  if (world().size() == 1) return;
  // Rank 1 names another caller at op #2: every rank raises the same CollectiveError.
  const char* tag = world().rank() == 1 ? "sampler" : "ddp.bucket[0]";
  std::string msg;
  try {
    comm.allreduce(t, ReduceOp::kSum, tag)->wait();
  } catch (const CollectiveError& e) {
    msg = e.what();
  }
  std::string others = world().size() == 2 ? "rank " : "ranks ";  // every rank but 1, in order
  for (int r = 0; r < world().size(); ++r)
    if (r != 1) others += (others.back() == ' ' ? "" : ",") + std::to_string(r);
  EXPECT_EQ(msg, "collective desync: " + others +
                     " called allreduce(float32, 4) #2 from "
                     "ddp.bucket[0]; rank 1 called allreduce(float32, 4) #2 from sampler");
  // Later ops fail the same way without touching MPI (ranks may have queued different ops).
  if (world().rank() == 0) {
    EXPECT_THROW(comm.barrier("x")->wait(), CollectiveError);
  } else {
    EXPECT_THROW(comm.broadcast(t, 0, "y")->wait(), CollectiveError);
  }
  barrier();
}
