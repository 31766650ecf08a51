// Verification and resume: a flipped byte, a missing shard or manifest each give their own
// error naming the file (and tensor); resume auto falls back; resume PATH fails loudly.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ckpt/dir_ops.h"
#include "ckpt/h5_image.h"
#include "ckpt/resolve.h"
#include "ckpt/store.h"
#include "ckpt/verify.h"
#include "io/h5_tensor.h"
#include "runtime/check.h"
#include "support/ckpt_test_util.h"

using namespace hpctrain;
using namespace hpctrain::testing;
namespace fs = std::filesystem;

namespace {

// Flips one byte in the middle of `tensor`'s data in `shard_path`.
void flip_byte(const std::string& shard_path, const std::string& tensor, int64_t nbytes) {
  int64_t off;
  {
    h5::Handle f = h5::open_h5(shard_path);
    off = h5::dataset_file_offset(f.get(), tensor);
  }
  ASSERT_GT(off, 0);
  std::fstream io(shard_path, std::ios::in | std::ios::out | std::ios::binary);
  io.seekg(off + nbytes / 2);
  char c;
  io.read(&c, 1);
  c ^= 0x5a;
  io.seekp(off + nbytes / 2);
  io.write(&c, 1);
}

CheckpointOptions small_shards(const std::string& dir) {
  CheckpointOptions o{dir};
  o.shard_mb = 1;
  return o;
}

CheckpointState three_shard_state(int seed) {
  CheckpointState s;
  s.tensors = {{"model/a", values({1 << 18}, at::kFloat, seed)},        // 1 MiB: shard 0
               {"model/b", values({1 << 18}, at::kFloat, seed)},        // shard 1
               {"optim/b.exp_avg", values({1000}, at::kFloat, seed)}};  // shard 2
  s.meta = {{"epoch", seed}};
  return s;
}

}  // namespace

TEST(Verify, FlippedByteNamesShardAndTensor) {
  TempDir d;
  ckpt::write_checkpoint_sync(small_shards(d.path), 5, three_shard_state(1));
  std::string step = d.path + "/step-00000005";
  EXPECT_NO_THROW(ckpt::verify_checkpoint(step));
  flip_byte(step + "/shard-00001-of-00003.h5", "model/b", 1 << 20);
  std::string err = error_of([&] { ckpt::verify_checkpoint(step); });
  EXPECT_NE(err.find("shard-00001-of-00003.h5"), std::string::npos) << err;
  EXPECT_NE(err.find("model/b"), std::string::npos) << err;
  EXPECT_NE(err.find("checksum mismatch"), std::string::npos) << err;
}

TEST(Verify, MissingShardAndMissingManifestHaveTheirOwnErrors) {
  TempDir d;
  ckpt::write_checkpoint_sync(small_shards(d.path), 5, three_shard_state(1));
  std::string step = d.path + "/step-00000005";
  fs::remove(step + "/shard-00002-of-00003.h5");
  std::string err = error_of([&] { ckpt::verify_checkpoint(step); });
  EXPECT_NE(err.find("shard file shard-00002-of-00003.h5 is missing"), std::string::npos) << err;
  fs::remove(step + "/manifest.json");
  err = error_of([&] { ckpt::verify_checkpoint(step); });
  EXPECT_NE(err.find("no manifest.json in " + step), std::string::npos) << err;
}

TEST(Verify, UnexpectedDatasetAndWrongShapeAreReported) {
  TempDir d;
  ckpt::write_checkpoint_sync({d.path}, 1, three_shard_state(1));
  std::string step = d.path + "/step-00000001";
  std::string shard = step + "/shard-00000-of-00001.h5";
  {
    h5::Handle f(H5Fopen(shard.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    h5::create_dataset(f.get(), "model/intruder", at::ones({2}), false, true);
  }
  // The whole-file checksum catches the change first...
  std::string err = error_of([&] { ckpt::verify_checkpoint(step); });
  EXPECT_NE(err.find(shard + ": file is "), std::string::npos) << err;
  // ...and with the manifest updated to the new file, the dataset the manifest lacks.
  ckpt::Manifest m = ckpt::read_manifest(step);
  ckpt::FileDigest fd = ckpt::digest_file(shard);
  m.shards[0].bytes = fd.bytes;
  m.shards[0].xxh3 = fd.xxh3;
  std::ofstream(step + "/manifest.json") << m.to_json().dump();
  err = error_of([&] { ckpt::verify_checkpoint(step); });
  EXPECT_NE(err.find("unexpected dataset model/intruder"), std::string::npos) << err;
}

TEST(Resume, AutoFallsBackToThePreviousVerifiedCheckpoint) {
  TempDir d;
  ckpt::write_checkpoint_sync(small_shards(d.path), 100, three_shard_state(1));
  ckpt::write_checkpoint_sync(small_shards(d.path), 200, three_shard_state(2));
  EXPECT_EQ(find_resume(d.path, "auto"), d.path + "/step-00000200");
  flip_byte(d.path + "/step-00000200/shard-00000-of-00003.h5", "model/a", 1 << 20);
  ::testing::internal::CaptureStderr();
  auto r = find_resume(d.path, "auto");
  std::string warn = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(r, d.path + "/step-00000100");
  EXPECT_NE(warn.find("skipping checkpoint " + d.path + "/step-00000200"), std::string::npos) << warn;
  EXPECT_EQ(read_checkpoint(*r, c10::kCPU).meta["epoch"], 1);

  // PATH takes exactly that one and fails loudly if bad; none starts fresh.
  std::string err = error_of([&] { find_resume(d.path, d.path + "/step-00000200"); });
  EXPECT_NE(err.find("model/a"), std::string::npos) << err;
  EXPECT_EQ(find_resume(d.path, d.path + "/step-00000100"), d.path + "/step-00000100");
  EXPECT_EQ(find_resume(d.path, "none"), std::nullopt);
  EXPECT_THROW(find_resume(d.path, d.path + "/nope"), Error);
}

TEST(Resume, EmptyOrMissingDirMeansFreshStart) {
  TempDir d;
  EXPECT_EQ(find_resume(d.path, "auto"), std::nullopt);
  EXPECT_EQ(find_resume(d.path + "/not-there", "auto"), std::nullopt);
  fs::create_directory(d.path + "/step-00000300.tmp");  // incomplete: never picked
  EXPECT_EQ(find_resume(d.path, "auto"), std::nullopt);
}

TEST(Layout, KeepDeletesOldestNeverNewestAndRemovesStale) {
  TempDir d;
  CheckpointOptions o{d.path};
  o.keep = 2;
  for (int step : {10, 20, 30, 40}) ckpt::write_checkpoint_sync(o, step, three_shard_state(step));
  std::vector<std::string> names;
  for (auto& [step, p] : ckpt::complete_checkpoints(d.path)) names.push_back(fs::path(p).filename());
  EXPECT_EQ(names, (std::vector<std::string>{"step-00000030", "step-00000040"}));
  EXPECT_FALSE(fs::exists(d.path + "/step-00000010.tmp"));

  fs::create_directory(d.path + "/step-00000050.tmp");
  std::ofstream(d.path + "/latest.tmp") << "step-00000050\n";
  EXPECT_EQ(ckpt::remove_stale(d.path), 2);
  EXPECT_FALSE(fs::exists(d.path + "/step-00000050.tmp"));
  EXPECT_TRUE(fs::exists(d.path + "/step-00000040/manifest.json"));
  EXPECT_EQ(read_latest(d.path), "step-00000040");
}

TEST(Layout, ResavingAStepReplacesIt) {
  TempDir d;
  ckpt::write_checkpoint_sync({d.path}, 10, three_shard_state(1));
  ckpt::write_checkpoint_sync({d.path}, 10, three_shard_state(2));
  EXPECT_EQ(read_checkpoint(d.path, c10::kCPU).meta["epoch"], 2);
  EXPECT_EQ(ckpt::complete_checkpoints(d.path).size(), 1u);
}
