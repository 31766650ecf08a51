// Crash safety: a child process (this binary, re-exec'd into a hidden test) writes step 200
// after a good step 100 and is SIGKILLed while sleeping at a named point of the write. Whatever
// the point, resume auto must pick a complete checkpoint that verifies: step 100 before the
// rename, step 200 after it; never a half state.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "ckpt/dir_ops.h"
#include "ckpt/resolve.h"
#include "ckpt/store.h"
#include "ckpt/verify.h"
#include "support/ckpt_test_util.h"

using namespace hpctrain;
using namespace hpctrain::testing;
namespace fs = std::filesystem;

namespace {

CheckpointState state_for(int step) {
  CheckpointState s;
  s.tensors = {{"model/a", values({1 << 18}, at::kFloat, step)},
               {"model/b", values({1 << 18}, at::kFloat, step)},
               {"state/c", values({100}, at::kLong, step)}};
  s.meta = {{"epoch", step}};
  return s;
}

CheckpointOptions opts(const std::string& dir) {
  CheckpointOptions o{dir};
  o.shard_mb = 1;  // 3 shards
  o.keep = 1;      // the crash may also land in pruning
  return o;
}

}  // namespace

// Run only as the child of CrashSafety (hidden from normal runs by the DISABLED_ prefix).
TEST(CrashChild, DISABLED_WriteStep200) {
  const char* dir = std::getenv("HPCTRAIN_CKPT_CRASH_DIR");
  const char* point = std::getenv("HPCTRAIN_CKPT_CRASH_POINT");
  ASSERT_NE(dir, nullptr);
  ASSERT_NE(point, nullptr);
  // At the point: say so (DIR/.at_point holds the point's name, written then renamed, so the
  // parent never reads half of it), then sleep for the parent's SIGKILL to land there.
  ckpt::set_fault_hook([at = std::string(point), d = std::string(dir)](const std::string& p) {
    if (p != at) return;
    { std::ofstream(d + "/.at_point.tmp") << p; }
    fs::rename(d + "/.at_point.tmp", d + "/.at_point");
    std::this_thread::sleep_for(std::chrono::seconds(600));
  });
  ckpt::write_checkpoint_sync(opts(dir), 200, state_for(200));
}

class CrashSafety : public ::testing::TestWithParam<std::pair<const char*, int>> {};

TEST_P(CrashSafety, KillDuringWriteLeavesOldOrNewCheckpoint) {
  auto [point, expected_step] = GetParam();
  TempDir d;
  ckpt::write_checkpoint_sync(opts(d.path), 100, state_for(100));

  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // A fresh singleton MPI in the child: drop the parent's MPI/PMIx environment.
    std::vector<std::string> mpi_vars;
    for (char** e = environ; *e; ++e) {
      std::string kv = *e;
      if (kv.rfind("OMPI_", 0) == 0 || kv.rfind("PMIX_", 0) == 0) mpi_vars.push_back(kv.substr(0, kv.find('=')));
    }
    for (auto& v : mpi_vars) unsetenv(v.c_str());
    setenv("HPCTRAIN_CKPT_CRASH_DIR", d.path.c_str(), 1);
    setenv("HPCTRAIN_CKPT_CRASH_POINT", point, 1);
    // Keep the child's gtest chatter out of the parent's output.
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
    execl("/proc/self/exe", "crash_child", "--gtest_also_run_disabled_tests",
          "--gtest_filter=CrashChild.DISABLED_WriteStep200", static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until the child says it sits at the point (its fault hook wrote DIR/.at_point with the
  // point's name and sleeps 600 s there); not arriving within 60 s fails the test.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::string p = point;
  std::string marker = d.path + "/.at_point";
  int status = 0;
  while (!fs::exists(marker)) {
    if (waitpid(pid, &status, WNOHANG) != 0) FAIL() << "child exited before reaching " << point;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL() << "child did not reach " << point << " within 60 s";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string reached;
  std::getline(std::ifstream(marker), reached);
  ASSERT_EQ(reached, p);
  ASSERT_EQ(waitpid(pid, &status, WNOHANG), 0) << "child exited at " << point;
  // What is on disk at each point (each one different).
  std::string tmp = d.path + "/step-00000200.tmp", fin = d.path + "/step-00000200";
  const std::string shard0 = "/shard-00000-of-00003.h5", shard1 = "/shard-00001-of-00003.h5";
  if (p == "in_shard:1" || p == "after_shard:0") {
    // in_shard:1 builds shard 1's image in memory right after shard 0 is on disk: no byte of
    // shard 1 on disk yet, at either point.
    EXPECT_TRUE(fs::exists(tmp + shard0)) << p;
    EXPECT_FALSE(fs::exists(tmp + shard1)) << p;
    EXPECT_FALSE(fs::exists(tmp + "/manifest.json")) << p;
  } else if (p == "before_rename") {
    EXPECT_TRUE(fs::exists(tmp + "/manifest.json")) << p;
    EXPECT_FALSE(fs::exists(fin)) << p;
  } else if (p == "before_latest") {
    EXPECT_TRUE(fs::exists(fin + "/manifest.json")) << p;
    EXPECT_EQ(read_latest(d.path), "step-00000100") << p;
  } else if (p == "before_prune") {
    EXPECT_EQ(read_latest(d.path), "step-00000200") << p;
    EXPECT_TRUE(fs::exists(d.path + "/step-00000100")) << p << ": pruned before the point";
  } else {
    FAIL() << "unknown point " << p;
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));

  auto r = find_resume(d.path, "auto");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, d.path + "/" + ckpt::step_dir_name(expected_step)) << point;
  CheckpointState got = read_checkpoint(*r, c10::kCPU);
  expect_same_tensors(state_for(expected_step), got);
  // `latest` always names a complete checkpoint that verifies (the old or the new one).
  std::string latest = read_latest(d.path);
  EXPECT_TRUE(latest == "step-00000100" || latest == "step-00000200") << latest;
  EXPECT_NO_THROW(ckpt::verify_checkpoint(d.path + "/" + latest));
  // A restarted writer cleans what the crash left.
  ckpt::remove_stale(d.path);
  EXPECT_FALSE(fs::exists(d.path + "/step-00000200.tmp"));
}

INSTANTIATE_TEST_SUITE_P(Points, CrashSafety,
                         ::testing::Values(std::make_pair("in_shard:1", 100), std::make_pair("after_shard:0", 100),
                                           std::make_pair("before_rename", 100), std::make_pair("before_latest", 200),
                                           std::make_pair("before_prune", 200)),
                         [](const auto& info) {
                           std::string s = info.param.first;
                           for (auto& c : s)
                             if (c == ':') c = '_';
                           return s;
                         });
