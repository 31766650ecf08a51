// CheckpointWriter across 1, 2 and 4 ranks: rank-0 writing and all_writers produce the same
// verified checkpoint; a write error on one rank is raised on every rank at the next boundary.
#include <gtest/gtest.h>

#include <algorithm>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "ckpt/checksum.h"
#include "ckpt/dir_ops.h"
#include "ckpt/h5_image.h"
#include "ckpt/manifest.h"
#include "ckpt/resolve.h"
#include "ckpt/verify.h"
#include "runtime/check.h"
#include "support/ckpt_test_util.h"
#include "support/recording_comm.h"
#include "support/test_world.h"

using namespace hpctrain;
using namespace hpctrain::testing;
namespace fs = std::filesystem;

namespace {

// A directory shared by all ranks: rank 0 creates it, everyone gets its name.
struct SharedDir {
  std::string path;
  SharedDir() {
    char buf[256] = {0};
    if (world().rank() == 0) {
      std::string tmpl = (fs::temp_directory_path() / "hpctrain_ckpt_mpi_XXXXXX").string();
      std::snprintf(buf, sizeof buf, "%s", mkdtemp(tmpl.data()));
    }
    MPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, world().mpi_comm());
    path = buf;
  }
  ~SharedDir() {
    MPI_Barrier(world().mpi_comm());
    if (world().rank() == 0) fs::remove_all(path);
  }
};

CheckpointState big_state(int seed) {
  CheckpointState s = sample_state(seed);
  // 5 shards of >= 1 MiB at a 1 MiB cap, so every rank writes one with 4 ranks.
  for (int i = 0; i < 5; ++i)
    s.tensors.emplace_back("model/block" + std::to_string(i), values({1 << 18}, at::kFloat, seed + i));
  return s;
}

void expect_all_ranks_raise(CheckpointWriter& w, const std::string& needle) {
  std::string err;
  try {
    w.finish();
  } catch (const CollectiveError& e) {
    err = e.what();
  }
  EXPECT_NE(err.find(needle), std::string::npos) << "rank " << world().rank() << ": " << err;
}

}  // namespace

class Writers : public ::testing::TestWithParam<bool> {};

TEST_P(Writers, SaveVerifyAndReadBackOnEveryRank) {
  SharedDir d;
  CheckpointOptions o{d.path};
  o.shard_mb = 1;
  o.all_writers = GetParam();
  o.keep = 2;
  CheckpointWriter w(o, cpu_comm());
  for (int step : {100, 200, 300}) {
    w.save(step, big_state(step));
    w.check_errors();
  }
  w.finish();
  MPI_Barrier(world().mpi_comm());
  auto r = find_resume(d.path, "auto");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, d.path + "/step-00000300");
  ckpt::Manifest m = ckpt::read_manifest(*r);
  EXPECT_EQ(m.world_size, world().size());
  EXPECT_GE(m.shards.size(), 6u);
  // Rank 0 learned every shard's size and whole-file checksum, and where each tensor lies,
  // also from the ranks that wrote them (all_writers).
  for (const auto& sh : m.shards) {
    EXPECT_TRUE(ckpt::is_hex64(sh.xxh3)) << sh.file;
    EXPECT_EQ(sh.bytes, static_cast<int64_t>(fs::file_size(*r + "/" + sh.file))) << sh.file;
    EXPECT_EQ(sh.xxh3, ckpt::digest_file(*r + "/" + sh.file).xxh3) << sh.file;
  }
  for (const auto& t : m.tensors)
    if (t.nbytes > 0) EXPECT_GE(t.offset, 0) << t.name;
  expect_same_tensors(big_state(300), read_checkpoint(*r, c10::kCPU));
  EXPECT_EQ(ckpt::complete_checkpoints(d.path).size(), 2u);  // keep 2
}

INSTANTIATE_TEST_SUITE_P(Ckpt, Writers, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? "AllWriters" : "Rank0Writes"; });

TEST(WriterErrors, FaultOnOneRankIsRaisedOnAllRanks) {
  SharedDir d;
  CheckpointOptions o{d.path};
  o.shard_mb = 1;
  o.all_writers = true;
  CheckpointWriter w(o, cpu_comm());
  w.save(1, big_state(1));
  w.finish();
  // The last rank fails after its shard (shard index == its rank in all_writers mode).
  int bad = world().size() - 1;
  std::string point = "after_shard:" + std::to_string(bad);
  {
    InjectFault fault(point, world().rank() == bad);
    w.save(2, big_state(2));
    expect_all_ranks_raise(
        w, "checkpoint step-00000002 failed: rank " + std::to_string(bad) + ": injected checkpoint fault at " + point);
  }
  MPI_Barrier(world().mpi_comm());
  EXPECT_EQ(find_resume(d.path, "auto"), d.path + "/step-00000001");
  EXPECT_TRUE(fs::exists(d.path + "/step-00000002.tmp"));  // never committed
}

TEST(WriterErrors, Rank0FaultIsRaisedOnAllRanksAtCheckErrors) {
  SharedDir d;
  CheckpointWriter w({d.path}, cpu_comm());
  std::string err;
  {
    InjectFault fault("before_manifest", world().rank() == 0);
    w.save(5, sample_state(5));
    // Step boundaries: the error must surface within a bounded number of them on every rank.
    for (int i = 0; i < 500 && err.empty(); ++i) {
      try {
        w.check_errors();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      } catch (const CollectiveError& e) {
        err = e.what();
      }
    }
  }
  EXPECT_NE(err.find("rank 0: injected checkpoint fault at before_manifest"), std::string::npos)
      << "rank " << world().rank() << ": " << err;
  EXPECT_NO_THROW(w.finish());
}

// check_errors is a collective only while a checkpoint is in flight; once every rank's write is
// agreed done, step boundaries cost nothing, and all ranks stay in step (rank 0 writes slowly
// here while the others have nothing to write, the case that used to retire at different times).
TEST_P(Writers, CheckErrorsIsFreeOnceTheWriteIsAgreedDone) {
  SharedDir d;
  CheckpointOptions o{d.path};
  o.shard_mb = 1;
  o.all_writers = GetParam();
  RecordingComm comm(cpu_comm());
  CheckpointWriter w(o, comm);
  w.save(10, big_state(10));
  int boundaries = 0;
  for (;;) {  // boundaries until the write is agreed done: a collective each
    int before = comm.ops;
    w.check_errors();
    ++boundaries;
    if (comm.ops == before) break;
    ASSERT_LT(boundaries, 100000) << "the write never completed";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Every rank left the loop at the same boundary (it is decided by an agreement).
  int all[2] = {boundaries, -boundaries};
  MPI_Allreduce(MPI_IN_PLACE, all, 2, MPI_INT, MPI_MAX, world().mpi_comm());
  EXPECT_EQ(all[0], -all[1]) << "rank " << world().rank() << " left after " << boundaries;
  int before = comm.ops;
  for (int i = 0; i < 50; ++i) w.check_errors();
  EXPECT_EQ(comm.ops, before);  // no collective per step without a checkpoint in flight
  w.finish();
  MPI_Barrier(world().mpi_comm());
  EXPECT_EQ(find_resume(d.path, "auto"), d.path + "/step-00000010");
}

// --ckpt-writers all cuts each rank's shard plan from its own tensor list: a rank that lists
// the same tensors in another order (or other sizes) is an error on every rank, before any shard
// is written (it once left a checkpoint without the shards of the disagreeing plan).
TEST(WriterErrors, AllWritersWithDifferentTensorOrderFailsOnEveryRank) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  SharedDir d;
  CheckpointOptions o{d.path};
  o.shard_mb = 1;
  o.all_writers = true;
  CheckpointWriter w(o, cpu_comm());
  CheckpointState s = big_state(1);
  if (world().rank() == 1) std::reverse(s.tensors.begin(), s.tensors.end());
  bool raised = false;
  try {
    w.save(3, s);
  } catch (const CollectiveError& e) {
    raised = true;
    EXPECT_NE(std::string(e.what()).find("the ranks' states differ"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(raised);
  EXPECT_FALSE(fs::exists(d.path + "/step-00000003"));
  w.save(4, big_state(4));  // the same state everywhere still works afterwards
  w.finish();
  EXPECT_EQ(find_resume(d.path, "auto"), d.path + "/step-00000004");
}
