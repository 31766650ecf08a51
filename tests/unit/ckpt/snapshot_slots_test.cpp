// SnapshotSlots (ckpt/snapshot_slots.h): the deferred copy holds the values at start() once
// before_update() returned; at most two slots (the newest whole one and the one being written);
// a write in flight makes start() skip; what a killed writer left (*.tmp) is removed on open.
#include <gtest/gtest.h>

#include <filesystem>

#include "ckpt/dir_ops.h"
#include "ckpt/snapshot_slots.h"
#include "support/ckpt_test_util.h"

using namespace hpctrain;
using namespace hpctrain::testing;
namespace fs = std::filesystem;

TEST(SnapshotSlots, DeferredCopyKeepsTheValuesAtStart) {
  TempDir d;
  SnapshotSlots slots(d.path + "/rank-00000");
  CheckpointState s = sample_state(1), want = sample_state(1);
  at::Tensor live = s.tensors[0].second;
  ASSERT_TRUE(slots.start(4, s));
  slots.before_update();
  live.add_(1000);  // the optimizer step after before_update()
  slots.wait();
  EXPECT_EQ(slots.take_error(), "");
  EXPECT_EQ(slots.last_step(), 4);
  expect_same_tensors(want, read_checkpoint(d.path + "/rank-00000/step-00000004", c10::kCPU));
}

TEST(SnapshotSlots, KeepsOneWholeSlotAndSkipsWhileBusy) {
  TempDir d;
  const std::string dir = d.path + "/rank-00001";
  SnapshotSlots slots(dir);
  for (int step = 2; step <= 10; step += 2) {
    ASSERT_TRUE(slots.start(step, sample_state(step)));
    EXPECT_FALSE(slots.busy() && slots.start(step + 1, sample_state(1)));  // in flight: skipped
    slots.before_update();
    slots.wait();
    auto whole = ckpt::complete_checkpoints(dir);
    ASSERT_EQ(whole.size(), 1u);
    EXPECT_EQ(whole[0].first, step);
  }
  EXPECT_EQ(slots.take_error(), "");
}

TEST(SnapshotSlots, OpenRemovesWhatAKilledWriterLeft) {
  TempDir d;
  const std::string dir = d.path + "/rank-00000";
  {
    SnapshotSlots slots(dir);
    ASSERT_TRUE(slots.start(2, sample_state(2)));
    slots.wait();
  }
  fs::create_directories(dir + "/step-00000004.tmp");  // a writer killed mid-write
  SnapshotSlots again(dir);
  EXPECT_FALSE(fs::exists(dir + "/step-00000004.tmp"));
  EXPECT_EQ(ckpt::complete_checkpoints(dir).size(), 1u);
}
