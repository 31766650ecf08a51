// CheckpointWriter in a world of one: async save + check_errors, sync mode, injected write
// errors surfacing at the next step boundary (never lost), finish() waiting for the last write.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "ckpt/reader.h"
#include "runtime/check.h"
#include "support/test_world.h"
#include "unit/ckpt/ckpt_test_util.h"

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

TEST(Writer, InjectedFaultRaisesAtNextBoundaryAndLeavesPreviousCheckpoint) {
  TempDir d;
  CheckpointOptions o{d.path};
  o.shard_mb = 1;
  CheckpointWriter w(o, cpu_comm());
  w.save(1, sample_state(1));
  w.finish();
  setenv("HPCTRAIN_CKPT_FAULT", "after_shard:0", 1);
  w.save(2, sample_state(2));
  std::string err;
  try {
    w.finish();  // check_errors would raise it too, once the thread is done
  } catch (const CollectiveError& e) {
    err = e.what();
  }
  unsetenv("HPCTRAIN_CKPT_FAULT");
  EXPECT_NE(err.find("checkpoint step-00000002 failed: rank 0: injected checkpoint fault at after_shard:0"),
            std::string::npos) << err;
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
  bool raised = false;
  for (int i = 0; i < 200 && !raised; ++i) {
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
