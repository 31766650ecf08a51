// Round trips through the shard files: every dtype, empty, 0-d and large tensors across shard
// boundaries; shard planning; manifest contents.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ckpt/dir_ops.h"
#include "ckpt/manifest.h"
#include "ckpt/resolve.h"
#include "ckpt/store.h"
#include "ckpt/verify.h"
#include "runtime/check.h"
#include "support/ckpt_test_util.h"

using namespace hpctrain;
using namespace hpctrain::testing;
namespace fs = std::filesystem;

TEST(ShardPlan, CapsAndGivesOversizedTensorsTheirOwnShard) {
  // cap 10: [4,4] | [12] | [3,7] | [11] | [1]
  EXPECT_EQ(ckpt::plan_shards({4, 4, 12, 3, 7, 11, 1}, 10), (std::vector<int>{0, 0, 1, 2, 2, 3, 4}));
  EXPECT_EQ(ckpt::plan_shards({20}, 10), (std::vector<int>{0}));
  EXPECT_EQ(ckpt::plan_shards({0, 0, 10, 0}, 10), (std::vector<int>{0, 0, 0, 0}));  // fits exactly
  EXPECT_TRUE(ckpt::plan_shards({}, 10).empty());
}

TEST(Names, StepAndShardNaming) {
  EXPECT_EQ(ckpt::step_dir_name(400), "step-00000400");
  EXPECT_EQ(ckpt::shard_file_name(1, 3), "shard-00001-of-00003.h5");
}

TEST(RoundTrip, EveryDtypeEmptyAndScalar) {
  TempDir d;
  CheckpointState s = sample_state();
  ckpt::write_checkpoint_sync({d.path}, 400, s, 2);
  EXPECT_TRUE(fs::exists(d.path + "/step-00000400/manifest.json"));
  EXPECT_TRUE(fs::exists(d.path + "/step-00000400/shard-00000-of-00001.h5"));
  EXPECT_EQ(read_latest(d.path), "step-00000400");

  CheckpointState got = read_checkpoint(d.path, c10::kCPU);  // via `latest`
  expect_same_tensors(s, got);
  EXPECT_EQ(got.meta["step"], 400);
  EXPECT_EQ(got.meta["world_size"], 2);
  EXPECT_EQ(got.meta["epoch"], 3);
  EXPECT_EQ(got.meta["sampler"]["offset"], 128);
  for (const char* k : {"hpctrain", "libtorch", "mpi", "hdf5"}) EXPECT_TRUE(got.meta["versions"].contains(k)) << k;

  ckpt::Manifest m = ckpt::read_manifest(d.path + "/step-00000400");
  ASSERT_EQ(m.tensors.size(), s.tensors.size());
  EXPECT_EQ(m.tensors[6].dtype, "bfloat16");
  EXPECT_EQ(m.tensors[3].shape, std::vector<int64_t>{});
  EXPECT_EQ(m.tensors[10].shape, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(m.tensors[0].xxh3.size(), 16u);
}

TEST(RoundTrip, LargeTensorsAcrossShardBoundariesCompressedAndNot) {
  for (bool compress : {false, true}) {
    TempDir d;
    CheckpointState s;
    // cap 1 MiB: 0.5 MiB + 0.75 MiB -> 2 shards; 3 MiB alone; two small ones share the last.
    s.tensors = {{"model/a", values({128, 1024}, at::kFloat, 1)},
                 {"model/b", values({3, 64, 1024}, at::kFloat, 2)},
                 {"model/big", values({3 << 18}, at::kFloat, 3)},
                 {"optim/c", values({1000}, at::kDouble, 4)},
                 {"state/d", values({10}, at::kLong, 5)}};
    CheckpointOptions o{d.path};
    o.shard_mb = 1;
    o.compress = compress;
    ckpt::write_checkpoint_sync(o, 8, s);
    ckpt::Manifest m = ckpt::read_manifest(d.path + "/step-00000008");
    ASSERT_EQ(m.shards.size(), 4u);
    EXPECT_EQ(m.shards[3].file, "shard-00003-of-00004.h5");
    std::vector<int> shards;
    for (auto& e : m.tensors) shards.push_back(e.shard);
    EXPECT_EQ(shards, (std::vector<int>{0, 1, 2, 3, 3}));
    for (auto& f : m.shards) EXPECT_TRUE(fs::exists(d.path + "/step-00000008/" + f.file)) << f.file;
    expect_same_tensors(s, read_checkpoint(d.path + "/step-00000008", c10::kCPU));
  }
}

TEST(RoundTrip, RejectsBadNames) {
  TempDir d;
  CheckpointState s;
  s.tensors = {{"noslash", at::ones({2})}};
  EXPECT_THROW(ckpt::write_checkpoint_sync({d.path}, 1, s), Error);
  s.tensors = {{"model/x", at::ones({2})}, {"model/x", at::ones({2})}};
  EXPECT_THROW(ckpt::write_checkpoint_sync({d.path}, 1, s), Error);
}

// Not a test: writes sample_state() as step 400 into $HPCTRAIN_CKPT_FIXTURE_DIR for the CLI
// e2e script (tests/e2e/test_ckpt_cli.sh), which runs it with --gtest_also_run_disabled_tests.
TEST(Fixture, DISABLED_WriteSampleCheckpoint) {
  const char* dir = std::getenv("HPCTRAIN_CKPT_FIXTURE_DIR");
  ASSERT_NE(dir, nullptr);
  CheckpointOptions o{dir};
  o.shard_mb = 1;
  CheckpointState s = sample_state();
  s.tensors.emplace_back("model/big", values({1 << 18}, at::kFloat, 9));  // forces 2 shards
  ckpt::write_checkpoint_sync(o, 400, s, 2);
}

// Not a test: the timed half of perf/ckpt/ckpt_bench.py's synthetic row. Writes
// $HPCTRAIN_CKPT_BENCH_MB MiB of float32 (64 MiB tensors, default 512 MiB shards) synchronously
// into $HPCTRAIN_CKPT_FIXTURE_DIR, as write_checkpoint_sync does, timing its phases, and prints
// one JSON line: bytes, seconds (the whole write), and where they went: write_s (shard files:
// HDF5 images, xxh3 and write() in one pass), fsync_s (the shards' fsyncs), commit_s (manifest,
// latest, directory fsyncs, renames).
TEST(Bench, DISABLED_SyncWriteThroughput) {
  const char* dir = std::getenv("HPCTRAIN_CKPT_FIXTURE_DIR");
  const char* mb_env = std::getenv("HPCTRAIN_CKPT_BENCH_MB");
  ASSERT_NE(dir, nullptr);
  int64_t mb = mb_env ? std::atoll(mb_env) : 1024;
  CheckpointState s;
  for (int64_t i = 0; i < mb / 64; ++i)
    s.tensors.emplace_back("model/t" + std::to_string(i), at::rand({16 << 20}, at::kFloat));
  using clock = std::chrono::steady_clock;
  auto secs = [](clock::time_point a, clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  auto t0 = clock::now();
  ckpt::NamedTensors host = ckpt::snapshot_to_host(s.tensors, /*copy_cpu=*/false);
  ckpt::Manifest m = ckpt::plan_manifest(1, s, 1, 512);
  std::string tmp = ckpt::tmp_dir_for(dir, 1);
  ckpt::write_shards(tmp, m, host, 0, 1, false, /*sync=*/false);
  auto t1 = clock::now();
  for (const auto& sh : m.shards) ckpt::fsync_path(tmp + "/" + sh.file);
  auto t2 = clock::now();
  ckpt::commit(dir, m, 0, /*shards_synced=*/true);
  auto t3 = clock::now();
  std::printf("{\"bytes\":%lld,\"seconds\":%.4f,\"write_s\":%.4f,\"fsync_s\":%.4f,\"commit_s\":%.4f}\n",
              static_cast<long long>(mb / 64 * 64) << 20, secs(t0, t3), secs(t0, t1), secs(t1, t2), secs(t2, t3));
}
