// write_h5_file (the one-pass shard writer): the file reads back through HDF5 with every
// dtype, empty and 0-d tensors, compressed or not; its digest and each tensor's checksum equal
// what a separate pass over the written bytes gives; tensors lie at the offsets it reports;
// the same tensors give the same bytes (no timestamps); the superblock says "closed"; a
// create error names the file. (A full disk: tests/e2e/bad_inputs.py, disk_full_tmpfs.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "ckpt/checksum.h"
#include "ckpt/h5_image.h"
#include "ckpt/store.h"
#include "io/h5_tensor.h"
#include "runtime/check.h"
#include "runtime/tensor_text.h"
#include "support/ckpt_test_util.h"

using namespace hpctrain;
using namespace hpctrain::testing;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

ckpt::NamedTensors tensors_of(const CheckpointState& s) {
  ckpt::NamedTensors out;
  for (auto& [n, t] : s.tensors) out.emplace_back(n, t.contiguous());
  out.emplace_back("model/big", values({3 << 18}, at::kFloat, 5));  // 3 MiB: several blocks
  return out;
}

}  // namespace

TEST(H5Image, ReadsBackWithDigestsOffsetsAndClosedSuperblock) {
  for (bool compress : {false, true}) {
    TempDir d;
    ckpt::NamedTensors ts = tensors_of(sample_state(2));
    ckpt::H5FileSpec spec;
    spec.tensors = &ts;
    spec.compress = compress;
    spec.root_attrs = {{"hpctrain_meta", "{\"step\":3}"}};
    std::string path = d.path + "/f.h5";
    ckpt::WrittenFile w = ckpt::write_h5_file(path, spec);

    std::string bytes = slurp(path);
    EXPECT_EQ(w.bytes, static_cast<int64_t>(bytes.size()));
    ckpt::FileDigest again = ckpt::digest_file(path);
    EXPECT_EQ(again.bytes, w.bytes);
    EXPECT_EQ(again.xxh3, w.xxh3);
    ASSERT_GE(bytes.size(), 24u);
    EXPECT_EQ(bytes.substr(20, 4), std::string(4, '\0')) << "file consistency flags must read 'closed'";

    h5::Handle f = h5::open_h5(path);
    std::string meta;
    EXPECT_TRUE(h5::read_attr_string(f.get(), "hpctrain_meta", &meta));
    EXPECT_EQ(meta, "{\"step\":3}");
    ASSERT_EQ(w.tensor_xxh3.size(), ts.size());
    for (size_t i = 0; i < ts.size(); ++i) {
      const auto& [name, t] = ts[i];
      at::Tensor got = h5::read_tensor(f.get(), name);
      EXPECT_EQ(got.scalar_type(), t.scalar_type()) << name;
      EXPECT_TRUE(at::equal(got, t)) << name;
      EXPECT_EQ(w.tensor_xxh3[i], ckpt::checksum(t)) << name;
      if (compress || t.numel() == 0) {
        EXPECT_EQ(w.tensor_offsets[i], -1) << name;
        continue;
      }
      ASSERT_GE(w.tensor_offsets[i], 0) << name;
      EXPECT_EQ(w.tensor_offsets[i], h5::dataset_file_offset(f.get(), name)) << name;
      EXPECT_EQ(bytes.compare(w.tensor_offsets[i], t.nbytes(), static_cast<const char*>(t.data_ptr()), t.nbytes()), 0)
          << name;
    }
  }
}

TEST(H5Image, SameTensorsGiveTheSameBytes) {
  TempDir d;
  ckpt::NamedTensors ts = tensors_of(sample_state(1));
  ckpt::H5FileSpec spec;
  spec.tensors = &ts;
  ckpt::WrittenFile a = ckpt::write_h5_file(d.path + "/a.h5", spec);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // a timestamp would differ now
  ckpt::WrittenFile b = ckpt::write_h5_file(d.path + "/b.h5", spec);
  EXPECT_EQ(a.xxh3, b.xxh3);
  EXPECT_EQ(slurp(d.path + "/a.h5"), slurp(d.path + "/b.h5"));
}

TEST(H5Image, WriteErrorNamesTheFile) {
  TempDir d;
  ckpt::NamedTensors ts = tensors_of(sample_state(1));
  ckpt::H5FileSpec spec;
  spec.tensors = &ts;
  std::string path = d.path + "/no-such-dir/f.h5";
  try {
    ckpt::write_h5_file(path, spec);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("create " + path + " failed: No such file or directory"), std::string::npos)
        << e.what();
  }
}

TEST(Printable, EscapesControlAndInvalidUtf8KeepsValidUtf8) {
  EXPECT_EQ(hpctrain::printable("model/fc.weight"), "model/fc.weight");
  EXPECT_EQ(hpctrain::printable(std::string("a\x01"
                                            "b\n\x7f",
                                            5)),
            "a\\x01b\\x0a\\x7f");
  EXPECT_EQ(hpctrain::printable("caf\xc3\xa9"), "caf\xc3\xa9");           // é stays
  EXPECT_EQ(hpctrain::printable("x\xc3(\xff\xfe"), "x\\xc3(\\xff\\xfe");  // broken sequences
  EXPECT_EQ(hpctrain::printable(std::string("\0z", 2)), "\\x00z");
  EXPECT_EQ(hpctrain::printable(hpctrain::printable("a\x02")), "a\\x02");  // idempotent
}

// The metadata of a layout (names, dtypes, shapes) is built by HDF5 once and reused for the
// next files: a reused one reads back with the new values, and its bytes equal a fresh build's.
TEST(H5Image, ReusedLayoutReadsBackAndEqualsAFreshBuild) {
  TempDir d;
  ckpt::NamedTensors first = tensors_of(sample_state(1)), second = tensors_of(sample_state(3));
  ckpt::H5FileSpec spec;
  spec.tensors = &first;
  ckpt::write_h5_file(d.path + "/first.h5", spec);  // builds (or finds) this layout
  spec.tensors = &second;
  ckpt::WrittenFile reused = ckpt::write_h5_file(d.path + "/reused.h5", spec);
  EXPECT_EQ(reused.xxh3, ckpt::digest_file(d.path + "/reused.h5").xxh3);
  h5::Handle f = h5::open_h5(d.path + "/reused.h5");
  for (size_t i = 0; i < second.size(); ++i) {
    EXPECT_TRUE(at::equal(h5::read_tensor(f.get(), second[i].first), second[i].second)) << second[i].first;
    EXPECT_EQ(reused.tensor_xxh3[i], ckpt::checksum(second[i].second)) << second[i].first;
  }
  // Seventeen other layouts push it out of the reuse table (16 entries); then it is rebuilt.
  for (int k = 0; k < 17; ++k) {
    ckpt::NamedTensors other = {{"model/w" + std::to_string(k), at::ones({k + 1})}};
    spec.tensors = &other;
    ckpt::write_h5_file(d.path + "/other.h5", spec);
  }
  spec.tensors = &second;
  ckpt::write_h5_file(d.path + "/fresh.h5", spec);
  EXPECT_EQ(slurp(d.path + "/fresh.h5"), slurp(d.path + "/reused.h5"));
}

// The layout is built in an unlinked scratch file: a big tensor's storage is a hole there, so
// nothing of its size is kept, and no scratch file is left behind (in /dev/shm or /tmp, or,
// next to the output).
TEST(H5Image, LayoutScratchFileLeavesNothingBehind) {
  TempDir d;
  auto scratch_files = [&] {
    int n = 0;
    std::error_code ec;
    for (const std::string& dir : {std::string("/dev/shm"), std::string("/tmp"), d.path})
      for (const auto& e : fs::directory_iterator(dir, ec))
        n += e.path().filename().string().rfind(".hpctrain-h5-layout-", 0) == 0;
    return n;
  };
  int before = scratch_files();
  ckpt::NamedTensors big = {{"model/w", at::zeros({64 << 18}, at::kFloat)}, {"model/b", at::ones({3})}};
  ckpt::H5FileSpec spec;
  spec.tensors = &big;
  ckpt::WrittenFile w = ckpt::write_h5_file(d.path + "/big.h5", spec);
  EXPECT_EQ(w.bytes, static_cast<int64_t>(fs::file_size(d.path + "/big.h5")));
  EXPECT_GT(w.bytes, int64_t{64} << 20);
  EXPECT_EQ(w.xxh3, ckpt::digest_file(d.path + "/big.h5").xxh3);
  EXPECT_EQ(scratch_files(), before);
  h5::Handle f = h5::open_h5(d.path + "/big.h5");
  EXPECT_TRUE(at::equal(h5::read_tensor(f.get(), "model/b"), big[1].second));
  spec.compress = true;
  ckpt::write_h5_file(d.path + "/small.h5", spec);
  EXPECT_EQ(scratch_files(), before);
  EXPECT_LT(fs::file_size(d.path + "/small.h5"), size_t{1} << 20);  // zeros deflate
}
