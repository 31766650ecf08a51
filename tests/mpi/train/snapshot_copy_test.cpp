// SnapshotCopies (train/snapshot_copy.h) over MPI: with every rank told it is on a host of its
// own, each rank's committed snapshot lands in its ring partner's copy-of-rank-RRRRR directory
// (two slots at most, each verifying as a checkpoint), and finish() returns once every source
// said "done".
#include <gtest/gtest.h>

#include <filesystem>

#include "ckpt/dir_ops.h"
#include "ckpt/snapshot_slots.h"
#include "runtime/world.h"
#include "support/ckpt_test_util.h"
#include "support/test_world.h"
#include "train/snapshot_copy.h"

using namespace hpctrain;
using namespace hpctrain::testing;
namespace fs = std::filesystem;

TEST(SnapshotCopies, EachSnapshotLandsOnTheNextHost) {
  World& w = world();
  if (w.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int r = w.rank(), n = w.size();
  std::vector<std::string> hosts;
  for (int i = 0; i < n; ++i) hosts.push_back("host" + std::to_string(i));
  // One directory for the job, the same on every rank (rank 0's temporary directory).
  TempDir mine;
  char path[512] = {};
  if (r == 0) std::snprintf(path, sizeof path, "%s", mine.path.c_str());
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, w.mpi_comm());
  const std::string job = path;
  {
    SnapshotCopies copies(w, hosts, job, /*nice=*/0);
    ASSERT_TRUE(copies.on());
    SnapshotSlots slots(job + "/rank-" + std::to_string(r),
                        [&](int64_t step, const std::string& dir) { copies.send(step, dir); });
    for (int step = 2; step <= 6; step += 2) {
      ASSERT_TRUE(slots.start(step, sample_state(step + r)));
      slots.wait();
      EXPECT_EQ(slots.take_error(), "");
    }
    slots.wait();
    copies.finish(/*timeout_s=*/30);
    EXPECT_EQ(copies.take_error(), "");
  }
  MPI_Barrier(w.mpi_comm());
  const int source = (r + n - 1) % n;  // who sends to this rank
  auto whole = ckpt::complete_checkpoints(job + "/" + snapshot_copy_dir_name(source));
  ASSERT_EQ(whole.size(), 2u) << "rank " << r;
  EXPECT_EQ(whole[0].first, 4);
  EXPECT_EQ(whole[1].first, 6);
  expect_same_tensors(sample_state(6 + source), read_checkpoint(whole[1].second, c10::kCPU));
  MPI_Barrier(w.mpi_comm());  // rank 0's directory goes last
}
