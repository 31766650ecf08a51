// Fashion-MNIST conversion on the real Debian package files, and the idx reader's errors.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "dataset/prep/fashion_mnist.h"
#include "dataset/h5_dataset.h"
#include "dataset/prep/idx_reader.h"
#include "runtime/check.h"
#include "temp_dir.h"

namespace fs = std::filesystem;
using hpctrain::testing::TempDir;

namespace {

const std::string kSrc = hpctrain::kFashionMnistDefaultSrc;

bool have_package() { return fs::exists(kSrc + "/train-images-idx3-ubyte.gz"); }

std::string convert_error(const std::string& src, const std::string& out) {
  try {
    hpctrain::convert_fashion_mnist(src, out);
  } catch (const hpctrain::Error& e) {
    return e.what();
  }
  return "no error";
}

// A copy of the package directory in `dir` where `file` is replaced by `bytes`.
std::string tampered_copy(const TempDir& dir, const std::string& file, const std::string& bytes) {
  std::string src = dir / "src";
  fs::create_directories(src);
  for (auto& e : fs::directory_iterator(kSrc)) fs::copy_file(e.path(), src + "/" + e.path().filename().string());
  std::ofstream(src + "/" + file, std::ios::binary | std::ios::trunc) << bytes;
  return src;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string gzip_of(const std::string& raw) {
  TempDir d;
  gzFile f = gzopen((d / "x.gz").c_str(), "wb");
  gzwrite(f, raw.data(), unsigned(raw.size()));
  gzclose(f);
  return read_bytes(d / "x.gz");
}

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

}  // namespace

TEST(FashionMnist, ConvertsPackageFiles) {
  if (!have_package()) GTEST_SKIP() << "dataset-fashion-mnist is not installed at " << kSrc;
  TempDir out;
  hpctrain::convert_fashion_mnist(kSrc, out.path());
  auto train = hpctrain::H5Dataset::open(out / "train.h5");
  auto test = hpctrain::H5Dataset::open(out / "test.h5");
  EXPECT_EQ(train.info().size, 60000);
  EXPECT_EQ(test.info().size, 10000);
  EXPECT_EQ(train.info().sample_shape, (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(train.info().num_classes, 10);
  std::vector<int64_t> per_class(10, 0);
  for (auto l : train.labels()) ++per_class[l];
  for (int k = 0; k < 10; ++k) EXPECT_EQ(per_class[k], 6000) << "class " << k;
  EXPECT_EQ(train.labels()[0], 9);  // the first training image is an ankle boot
  // Reference for the first training image, derived independently from the raw idx bytes:
  //   python3 -c "import gzip,zlib; b=gzip.open('train-images-idx3-ubyte.gz').read()[16:16+784];
  //               print(hex(zlib.crc32(b)), sum(b))"   ->   0xf270beb5 76247
  std::vector<float> px(784);
  train.read({0}, px.data());
  std::vector<uint8_t> bytes(px.begin(), px.end());
  uint64_t sum = 0;
  for (auto b : bytes) sum += b;
  EXPECT_EQ(crc32(0, bytes.data(), 784), 0xf270beb5u);
  EXPECT_EQ(sum, 76247u);
  // Training-set statistics, in both files (python: mean of all train pixels / 255 = 0.28604).
  EXPECT_NEAR(train.info().mean[0], 0.2860406, 1e-6);
  EXPECT_NEAR(train.info().std[0], 0.3530, 2e-4);  // torchvision's published 0.3530
  EXPECT_EQ(test.info().mean, train.info().mean);
  EXPECT_EQ(test.info().std, train.info().std);
}

TEST(FashionMnist, TruncatedGzipNamesFileAndLeavesNoOutput) {
  if (!have_package()) GTEST_SKIP() << "dataset-fashion-mnist is not installed at " << kSrc;
  TempDir d;
  std::string good = read_bytes(kSrc + "/t10k-labels-idx1-ubyte.gz");
  auto src = tampered_copy(d, "t10k-labels-idx1-ubyte.gz", good.substr(0, good.size() / 2));
  auto msg = convert_error(src, d / "out");
  EXPECT_HAS(msg, "t10k-labels-idx1-ubyte.gz: truncated");
  EXPECT_FALSE(fs::exists(d / "out/train.h5"));
  EXPECT_FALSE(fs::exists(d / "out/test.h5"));
  if (fs::exists(d / "out")) EXPECT_TRUE(fs::is_empty(d / "out")) << "temporary files left behind";
}

TEST(FashionMnist, CorruptTrailerIsDetected) {
  if (!have_package()) GTEST_SKIP() << "dataset-fashion-mnist is not installed at " << kSrc;
  TempDir d;
  std::string bad = read_bytes(kSrc + "/train-labels-idx1-ubyte.gz");
  bad[bad.size() - 6] ^= 0x5a;  // inside the CRC-32 of the gzip trailer
  auto msg = convert_error(tampered_copy(d, "train-labels-idx1-ubyte.gz", bad), d / "out");
  EXPECT_HAS(msg, "train-labels-idx1-ubyte.gz: corrupt");
  EXPECT_FALSE(fs::exists(d / "out/train.h5"));
}

TEST(IdxReader, WrongMagicAndNotGzipAndExtraBytes) {
  TempDir d;
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(d / name, std::ios::binary) << bytes;
    return d / name;
  };
  // Label file header: magic 0x00000801, count 3, then 3 labels.
  std::string labels("\x00\x00\x08\x01\x00\x00\x00\x03\x01\x02\x03", 11);
  auto ok = hpctrain::read_idx_gz(write("ok.gz", gzip_of(labels)), 1);
  EXPECT_EQ(ok.dims, (std::vector<int64_t>{3}));
  EXPECT_EQ(ok.data, (std::vector<uint8_t>{1, 2, 3}));
  auto err = [](const std::string& path, int rank) -> std::string {
    try {
      hpctrain::read_idx_gz(path, rank);
    } catch (const hpctrain::Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_HAS(err(d / "ok.gz", 3), "ok.gz: bad idx magic number 0x00000801 (expected 0x00000803)");
  EXPECT_HAS(err(write("plain.gz", labels), 1), "plain.gz: not a gzip stream");
  EXPECT_HAS(err(write("extra.gz", gzip_of(labels + "x")), 1), "extra.gz: extra bytes after the idx payload");
  EXPECT_HAS(err(write("short.gz", gzip_of(labels.substr(0, 9))), 1),
             "short.gz: truncated: the idx payload needs 3 bytes, got 1");
  EXPECT_HAS(err(d / "missing.gz", 1), "missing.gz: cannot open");
}

TEST(FashionMnist, LabelOutOfRangeIsRejected) {
  if (!have_package()) GTEST_SKIP() << "dataset-fashion-mnist is not installed at " << kSrc;
  TempDir d;
  std::string raw(8 + 10000, '\0');
  std::string head("\x00\x00\x08\x01\x00\x00\x27\x10", 8);  // 10000 labels
  raw.replace(0, 8, head);
  raw[8 + 17] = 10;
  auto msg = convert_error(tampered_copy(d, "t10k-labels-idx1-ubyte.gz", gzip_of(raw)), d / "out");
  EXPECT_HAS(msg, "t10k-labels-idx1-ubyte.gz: label 10 at index 17 is outside [0,10)");
  EXPECT_FALSE(fs::exists(d / "out/train.h5"));
}
