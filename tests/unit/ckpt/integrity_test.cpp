// Every byte of a shard is covered: flipping any single byte of its HDF5 metadata (every one of
// them) or of its tensor data (many positions) fails verification with the file named, and
// with the tensor named when the byte is tensor data. A truncated shard, a shard swapped in
// from another checkpoint (same names, other values), a malformed shard checksum in the
// manifest each have their own one-line error. Paths ending in `latest` resolve everywhere.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ckpt/dir_ops.h"
#include "ckpt/resolve.h"
#include "ckpt/store.h"
#include "ckpt/verify.h"
#include "runtime/check.h"
#include "support/ckpt_test_util.h"

using namespace hpctrain;
using namespace hpctrain::testing;
namespace fs = std::filesystem;

namespace {

// A cnn-like checkpoint: model params and BN buffers, optimizer momenta, trainer state, in one
// shard (so the file holds the model and optim groups and the gap between them).
CheckpointState cnn_like(int seed) {
  CheckpointState s;
  s.tensors = {{"model/features.0.weight", values({32, 1, 3, 3}, at::kFloat, seed)},
               {"model/features.0.bias", values({32}, at::kFloat, seed)},
               {"model/features.1.weight", values({32}, at::kFloat, seed + 1)},
               {"model/features.1.running_var", values({32}, at::kFloat, seed + 2)},
               {"model/features.1.num_batches_tracked", at::scalar_tensor(int64_t{40 + seed}, at::kLong)},
               {"model/classifier.0.weight", values({64, 196}, at::kFloat, seed)},
               {"model/classifier.0.bias", values({64}, at::kFloat, seed)},
               {"optim/features.0.weight.momentum_buffer", values({32, 1, 3, 3}, at::kFloat, seed + 3)},
               {"optim/classifier.0.weight.momentum_buffer", values({64, 196}, at::kFloat, seed + 4)},
               {"state/rng.cpu", values({64}, at::kByte, seed)}};
  s.meta = {{"epoch", seed}};
  return s;
}

void flip(const std::string& path, int64_t off) {
  std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
  io.seekg(off);
  char c;
  io.read(&c, 1);
  c = static_cast<char>(c ^ 0xff);
  io.seekp(off);
  io.write(&c, 1);
}

void rewrite_manifest(const std::string& step, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j;
  std::ifstream(step + "/manifest.json") >> j;
  edit(j);
  std::ofstream(step + "/manifest.json") << j.dump();
}

}  // namespace

TEST(Integrity, EveryMetadataByteAndManyDataBytesFailVerifyNamingTheFile) {
  TempDir d;
  ckpt::write_checkpoint_sync({d.path}, 10, cnn_like(1));
  std::string step = d.path + "/step-00000010";
  std::string shard = step + "/shard-00000-of-00001.h5";
  ckpt::Manifest m = ckpt::read_manifest(step);
  const int64_t size = m.shards[0].bytes;
  ASSERT_EQ(size, static_cast<int64_t>(fs::file_size(shard)));
  // The file's own layout: where each tensor's bytes are; everything else is HDF5 metadata.
  std::vector<int> owner(size, -1);
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    ASSERT_GE(m.tensors[i].offset, 0) << m.tensors[i].name;
    for (int64_t b = 0; b < m.tensors[i].nbytes; ++b) owner[m.tensors[i].offset + b] = static_cast<int>(i);
  }
  std::vector<int64_t> positions;
  int64_t meta_bytes = 0;
  for (int64_t b = 0; b < size; ++b)
    if (owner[b] < 0) positions.push_back(b), ++meta_bytes;
  for (size_t i = 0; i < m.tensors.size(); ++i)  // first, middle and last byte of every tensor
    for (int64_t b : {int64_t{0}, m.tensors[i].nbytes / 2, m.tensors[i].nbytes - 1})
      positions.push_back(m.tensors[i].offset + b);
  ASSERT_GT(meta_bytes, 2000);  // superblock, object headers, heaps, B-trees
  int64_t failures = 0, named_tensor = 0;
  for (int64_t pos : positions) {
    flip(shard, pos);
    std::string err = error_of([&] { ckpt::verify_checkpoint(step); });
    flip(shard, pos);  // restore
    bool names_file = err.rfind(shard + ": file checksum mismatch", 0) == 0;
    EXPECT_TRUE(names_file) << "byte " << pos << ": " << err;
    if (!names_file && ++failures > 5) break;
    if (owner[pos] >= 0) {
      bool named = err.find("tensor " + m.tensors[owner[pos]].name + ": checksum mismatch") != std::string::npos;
      EXPECT_TRUE(named) << "byte " << pos << ": " << err;
      named_tensor += named;
    } else {
      EXPECT_NE(err.find("outside the tensor data (HDF5 metadata)"), std::string::npos)
          << "byte " << pos << ": " << err;
    }
  }
  EXPECT_EQ(named_tensor, 3 * static_cast<int64_t>(m.tensors.size()));
  EXPECT_NO_THROW(ckpt::verify_checkpoint(step));  // restored: verifies again
  std::printf("flipped %zu bytes (%lld HDF5 metadata, %zu tensor data) of a %lld-byte shard: all caught\n",
              positions.size(), static_cast<long long>(meta_bytes), positions.size() - meta_bytes,
              static_cast<long long>(size));
}

TEST(Integrity, TruncatedSwappedAndMalformedHaveTheirOwnErrors) {
  TempDir a, b;
  ckpt::write_checkpoint_sync({a.path}, 10, cnn_like(1));
  ckpt::write_checkpoint_sync({b.path}, 10, cnn_like(2));  // same names and shapes, other values
  std::string step = a.path + "/step-00000010";
  std::string shard = step + "/shard-00000-of-00001.h5";
  ckpt::Manifest m = ckpt::read_manifest(step);

  fs::copy_file(b.path + "/step-00000010/shard-00000-of-00001.h5", shard, fs::copy_options::overwrite_existing);
  ASSERT_EQ(static_cast<int64_t>(fs::file_size(shard)), m.shards[0].bytes);  // same layout, same size
  std::string err = error_of([&] { ckpt::verify_checkpoint(step); });
  EXPECT_EQ(err.rfind(shard + ": file checksum mismatch", 0), 0u) << err;
  EXPECT_NE(err.find("tensor model/features.0.weight: checksum mismatch"), std::string::npos) << err;

  fs::resize_file(shard, m.shards[0].bytes / 2);
  err = error_of([&] { ckpt::verify_checkpoint(step); });
  EXPECT_NE(err.find(shard + ": file is " + std::to_string(m.shards[0].bytes / 2) + " bytes, the manifest says " +
                     std::to_string(m.shards[0].bytes) + " (truncated"),
            std::string::npos)
      << err;

  for (std::string bad : {std::string("12345"), std::string("zzzzzzzzzzzzzzzz"), std::string("\x01\x02", 2)}) {
    rewrite_manifest(step, [&](nlohmann::json& j) { j["shards"][0]["xxh3"] = bad; });
    err = error_of([&] { ckpt::verify_checkpoint(step); });
    EXPECT_NE(err.find("manifest.json: shard shard-00000-of-00001.h5: malformed checksum"), std::string::npos) << err;
    EXPECT_EQ(err.find('\x01'), std::string::npos) << "raw byte in: " << err;
  }
}

TEST(Integrity, FlippedMetadataByteMakesResumeAutoFallBack) {
  TempDir d;
  ckpt::write_checkpoint_sync({d.path}, 100, cnn_like(1));
  ckpt::write_checkpoint_sync({d.path}, 200, cnn_like(2));
  flip(d.path + "/step-00000200/shard-00000-of-00001.h5", 100);  // in the superblock/root group
  ::testing::internal::CaptureStderr();
  auto r = find_resume(d.path, "auto");
  std::string warn = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(r, d.path + "/step-00000100");
  EXPECT_NE(warn.find("skipping checkpoint " + d.path + "/step-00000200"), std::string::npos) << warn;
  EXPECT_NE(warn.find("file checksum mismatch"), std::string::npos) << warn;
  std::string err = error_of([&] { find_resume(d.path, d.path + "/latest"); });  // names the bad one
  EXPECT_NE(err.find("step-00000200/shard-00000-of-00001.h5: file checksum mismatch"), std::string::npos) << err;
}

TEST(Paths, LatestRootAndStepDirResolveTheSame) {
  TempDir d;
  ckpt::write_checkpoint_sync({d.path}, 7, cnn_like(1));
  std::string step = d.path + "/step-00000007";
  for (std::string p : {d.path, d.path + "/", d.path + "/latest", step, step + "/"})
    EXPECT_EQ(fs::path(ckpt::resolve_checkpoint_path(p)), fs::path(step)) << p;
  EXPECT_EQ(read_checkpoint(d.path + "/latest", c10::kCPU).meta["step"], 7);
  EXPECT_EQ(find_resume(d.path, d.path + "/latest"), step);
  std::ofstream(d.path + "/latest") << "step-00000099\n";  // names a checkpoint that is gone
  std::string err = error_of([&] { ckpt::resolve_checkpoint_path(d.path + "/latest"); });
  EXPECT_NE(err.find("latest names step-00000099, which is not a checkpoint directory there"), std::string::npos)
      << err;
}
