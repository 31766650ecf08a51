// CheckpointWriter in a world of one: async save + check_errors, sync mode, injected write
// errors surfacing at the next step boundary (never lost), finish() waiting for the last write,
// per-checkpoint stats (stall, write time, bytes).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "ckpt/resolve.h"
#include "ckpt/store.h"
#include "ckpt/verify.h"
#include "runtime/check.h"
#include "support/ckpt_test_util.h"
#include "support/test_world.h"

using namespace hpctrain;
using namespace hpctrain::testing;
namespace fs = std::filesystem;

TEST(Writer, AsyncSaveSnapshotsAtCallTime) {
  TempDir d;
  CheckpointWriter w({d.path}, cpu_comm());
  CheckpointState s = sample_state(1);
  CheckpointState expected = sample_state(1);
  at::Tensor live = s.tensors[0].second;
  w.save(10, s);
  live.add_(1000);  // training goes on: the checkpoint must hold the values at save()
  w.check_errors();
  w.save(20, sample_state(2));  // waits for step 10 first (one in flight)
  w.finish();
  expect_same_tensors(expected, read_checkpoint(d.path + "/step-00000010", c10::kCPU));
  expect_same_tensors(sample_state(2), read_checkpoint(d.path, c10::kCPU));
  EXPECT_EQ(read_checkpoint(d.path, c10::kCPU).meta["step"], 20);
}

TEST(Writer, SyncModeCommitsBeforeReturning) {
  TempDir d;
  CheckpointOptions o{d.path};
  o.async = false;
  o.keep = 1;
  CheckpointWriter w(o, cpu_comm());
  w.save(1, sample_state(1));
  EXPECT_TRUE(fs::exists(d.path + "/step-00000001/manifest.json"));
  w.save(2, sample_state(2));
  EXPECT_FALSE(fs::exists(d.path + "/step-00000001"));
  EXPECT_TRUE(fs::exists(d.path + "/step-00000002/manifest.json"));
  w.finish();
}

int64_t payload_bytes(const CheckpointState& s) {
  int64_t n = 0;
  for (auto& [name, t] : s.tensors) n += static_cast<int64_t>(t.nbytes());
  return n;
}

TEST(Writer, StatsPerCommittedCheckpoint) {
  TempDir d;
  CheckpointWriter w({d.path}, cpu_comm());
  w.save(10, sample_state(1));
  w.save(20, sample_state(2));  // retires step 10 (waits for it)
  std::vector<CheckpointStats> first = w.take_completed();
  w.finish();
  std::vector<CheckpointStats> rest = w.take_completed();
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_TRUE(w.take_completed().empty());  // taken once
  EXPECT_EQ(first[0].step, 10);
  EXPECT_EQ(rest[0].step, 20);
  for (const auto& c : {first[0], rest[0]}) {
    EXPECT_EQ(c.bytes, payload_bytes(sample_state(1)));
    EXPECT_TRUE(c.async);
    EXPECT_GT(c.write_s, 0);  // at least the fsyncs
    EXPECT_GE(c.stall_s, 0);
  }
  ckpt::Manifest m = ckpt::read_manifest(d.path + "/step-00000020");
  int64_t manifest_bytes = 0;
  for (auto& e : m.tensors) manifest_bytes += e.nbytes;
  EXPECT_EQ(rest[0].bytes, manifest_bytes);

  // Synchronous: the caller waits for the whole write, so the stall covers it.
  CheckpointOptions o{d.path + "/sync"};
  o.async = false;
  CheckpointWriter s(o, cpu_comm());
  s.save(5, sample_state(3));
  std::vector<CheckpointStats> sync = s.take_completed();
  ASSERT_EQ(sync.size(), 1u);
  EXPECT_FALSE(sync[0].async);
  EXPECT_GT(sync[0].write_s, 0);
  EXPECT_GE(sync[0].stall_s, sync[0].write_s);
  s.finish();
  EXPECT_TRUE(s.take_completed().empty());
}

TEST(Snapshot, RecyclesMatchingBuffersAndCopiesCurrentValues) {
  CheckpointState a = sample_state(1), b = sample_state(2);
  ckpt::NamedTensors first = ckpt::snapshot_to_host(a.tensors);
  std::vector<const void*> ptrs;
  for (auto& [n, t] : first) ptrs.push_back(t.data_ptr());
  b.tensors[1].second = values({9}, at::kFloat, 2);  // features.0.bias: another shape
  ckpt::NamedTensors second = ckpt::snapshot_to_host(b.tensors, true, &first);
  EXPECT_TRUE(first.empty());
  ASSERT_EQ(second.size(), b.tensors.size());
  for (size_t i = 0; i < second.size(); ++i) {
    EXPECT_TRUE(at::equal(second[i].second, b.tensors[i].second)) << second[i].first;
    if (second[i].second.numel() == 0) continue;  // state/empty has no data pointer
    EXPECT_NE(second[i].second.data_ptr(), b.tensors[i].second.data_ptr()) << "a copy, not an alias";
    if (i == 1)
      EXPECT_NE(second[i].second.data_ptr(), ptrs[i]) << "shape changed: fresh buffer";
    else
      EXPECT_EQ(second[i].second.data_ptr(), ptrs[i]) << second[i].first;
  }
}

TEST(Writer, FailedWriteHasNoStats) {
  TempDir d;
  CheckpointWriter w({d.path}, cpu_comm());
  {
    InjectFault fault("before_manifest");
    w.save(2, sample_state(2));
    EXPECT_THROW(w.finish(), CollectiveError);
  }
  EXPECT_TRUE(w.take_completed().empty());
}

TEST(Writer, InjectedFaultRaisesAtNextBoundaryAndLeavesPreviousCheckpoint) {
  TempDir d;
  CheckpointOptions o{d.path};
  o.shard_mb = 1;
  CheckpointWriter w(o, cpu_comm());
  w.save(1, sample_state(1));
  w.finish();
  std::string err;
  {
    InjectFault fault("after_shard:0");
    w.save(2, sample_state(2));
    try {
      w.finish();  // check_errors would raise it too, once the thread is done
    } catch (const CollectiveError& e) {
      err = e.what();
    }
  }
  EXPECT_NE(err.find("checkpoint step-00000002 failed: rank 0: injected checkpoint fault at after_shard:0"),
            std::string::npos)
      << err;
  EXPECT_EQ(find_resume(d.path, "auto"), d.path + "/step-00000001");
  // The error was reported once; the writer goes on and the next save works.
  w.save(3, sample_state(3));
  w.finish();
  EXPECT_EQ(find_resume(d.path, "auto"), d.path + "/step-00000003");
}

TEST(Writer, CheckErrorsRaisesAnUnwritableDirectory) {
  TempDir d;
  CheckpointWriter w({d.path + "/ckpt"}, cpu_comm());
  // A regular file where the step's tmp directory must go: the write fails in the thread.
  std::ofstream(d.path + "/ckpt/step-00000005.tmp") << "x";
  w.save(5, sample_state(1));
  // Polls for the event, not against a short clock: the error is raised once the thread has
  // tried the write, however slow the machine (60 s only bounds a hang).
  bool raised = false;
  for (int i = 0; i < 6000 && !raised; ++i) {
    try {
      w.check_errors();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } catch (const CollectiveError& e) {
      raised = true;
      EXPECT_NE(std::string(e.what()).find("step-00000005.tmp"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(raised);
  EXPECT_NO_THROW(w.finish());
}

TEST(Writer, BadTensorNameFailsOnSave) {
  TempDir d;
  CheckpointWriter w({d.path}, cpu_comm());
  CheckpointState s;
  s.tensors = {{"weight", at::ones({2})}};
  EXPECT_THROW(w.save(1, s), CollectiveError);
}

// Snapshot::kBeforeUpdate: the writer thread copies; once before_update() returns the caller
// may change its tensors, and the checkpoint still holds the values of save().
TEST(Writer, DeferredSnapshotHoldsTheValuesOfSaveAfterBeforeUpdate) {
  TempDir d;
  CheckpointWriter w({d.path}, cpu_comm());
  for (int round = 0; round < 3; ++round) {  // rounds 2 and 3 copy into the recycled buffers
    CheckpointState s = sample_state(round + 1), expected = sample_state(round + 1);
    std::vector<at::Tensor> live;
    for (auto& [name, t] : s.tensors) live.push_back(t);
    int64_t step = 10 * (round + 1);
    w.save(step, s, Snapshot::kBeforeUpdate);
    double waited = w.before_update();
    EXPECT_GE(waited, 0.0);
    EXPECT_EQ(w.before_update(), 0.0);  // taken: no second wait
    for (at::Tensor& t : live)
      if (t.is_floating_point()) t.add_(1000);  // the optimizer step
    w.check_errors();
    w.finish();
    expect_same_tensors(expected, read_checkpoint(d.path + "/step-000000" + std::to_string(step), c10::kCPU));
    std::vector<CheckpointStats> st = w.take_completed();
    ASSERT_EQ(st.size(), 1u);
    EXPECT_GE(st[0].stall_s, waited);  // the wait counts as stall
  }
  EXPECT_EQ(w.before_update(), 0.0);  // nothing in flight
}

TEST(Writer, DeferredSnapshotErrorsStillFailOnSave) {
  TempDir d;
  CheckpointWriter w({d.path}, cpu_comm());
  CheckpointState s;
  s.tensors = {{"weight", at::ones({2})}};
  EXPECT_THROW(w.save(1, s, Snapshot::kBeforeUpdate), CollectiveError);
}
