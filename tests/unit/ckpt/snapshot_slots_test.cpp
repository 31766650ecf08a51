// SnapshotSlots (ckpt/snapshot_slots.h): the deferred copy holds the values at start() once
// before_update() returned; at most two slots (the previous whole one stays until the next
// write begins); a write in flight (its after_commit hook included) makes start() skip; what a
// killed writer left (*.tmp) is removed on open; commit_snapshot_files keeps the same discipline.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "ckpt/dir_ops.h"
#include "ckpt/manifest.h"
#include "ckpt/snapshot_slots.h"
#include "runtime/check.h"
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

TEST(SnapshotSlots, KeepsThePreviousSlotUntilTheNextWriteAndSkipsWhileBusy) {
  TempDir d;
  const std::string dir = d.path + "/rank-00001";
  SnapshotSlots slots(dir);
  for (int step = 2; step <= 10; step += 2) {
    ASSERT_TRUE(slots.start(step, sample_state(step)));
    EXPECT_FALSE(slots.busy() && slots.start(step + 1, sample_state(1)));  // in flight: skipped
    slots.before_update();
    slots.wait();
    auto whole = ckpt::complete_checkpoints(dir);
    ASSERT_EQ(whole.size(), step == 2 ? 1u : 2u);
    EXPECT_EQ(whole.back().first, step);
    if (step > 2) EXPECT_EQ(whole.front().first, step - 2);
  }
  EXPECT_EQ(slots.take_error(), "");
}

TEST(SnapshotSlots, AfterCommitRunsOnTheWriterAndCountsAsBusy) {
  TempDir d;
  const std::string dir = d.path + "/rank-00000";
  std::atomic<bool> release{false};
  std::vector<std::pair<int64_t, std::string>> seen;
  SnapshotSlots slots(dir, [&](int64_t step, const std::string& step_dir) {
    seen.emplace_back(step, step_dir);
    while (!release) std::this_thread::yield();
    if (step == 4) throw Error("the copy failed");
  });
  ASSERT_TRUE(slots.start(2, sample_state(2)));
  slots.before_update();
  while (seen.empty()) std::this_thread::yield();
  EXPECT_TRUE(slots.busy());
  EXPECT_FALSE(slots.start(3, sample_state(3)));
  release = true;
  slots.wait();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].first, 2);
  EXPECT_TRUE(fs::exists(seen[0].second + "/manifest.json"));
  ASSERT_TRUE(slots.start(4, sample_state(4)));
  slots.wait();
  EXPECT_NE(slots.take_error().find("the copy failed"), std::string::npos);
  EXPECT_EQ(ckpt::complete_checkpoints(dir).back().first, 4);  // the snapshot itself committed
}

TEST(SnapshotSlots, CommitSnapshotFilesKeepsTwoSlots) {
  TempDir d;
  const std::string src = d.path + "/rank-00003", copy = d.path + "/copy-of-rank-00003";
  SnapshotSlots slots(src);
  for (int step = 2; step <= 6; step += 2) {
    ASSERT_TRUE(slots.start(step, sample_state(step)));
    slots.wait();
    std::vector<std::pair<std::string, std::string>> files;
    const std::string sd = src + "/" + ckpt::step_dir_name(step);
    for (const auto& e : fs::directory_iterator(sd)) {
      std::ifstream in(e.path(), std::ios::binary);
      files.emplace_back(e.path().filename().string(), std::string(std::istreambuf_iterator<char>(in), {}));
    }
    commit_snapshot_files(copy, step, files);
    auto whole = ckpt::complete_checkpoints(copy);
    ASSERT_EQ(whole.size(), step == 2 ? 1u : 2u);
    EXPECT_EQ(whole.back().first, step);
    expect_same_tensors(sample_state(step), read_checkpoint(whole.back().second, c10::kCPU));
  }
  EXPECT_THROW(commit_snapshot_files(copy, 8, {{"../evil", "x"}}), Error);
  EXPECT_FALSE(fs::exists(copy + "/step-00000008.tmp"));
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
