// H5Dataset: every bad-file case gives its own clear error; values round-trip exactly; reads of
// scattered samples are coalesced into one H5Dread.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "dataset/h5_dataset.h"
#include "dataset/prep/h5_writer.h"
#include "dataset/prep/synthetic.h"
#include "runtime/check.h"
#include "temp_dir.h"

using hpctrain::H5Dataset;
using hpctrain::testing::TempDir;

namespace {

// Writes one dataset `name` of `type` with `dims` (contents zero except labels).
void add_dataset(hid_t f, const char* name, hid_t type, std::vector<hsize_t> dims,
                 const std::vector<int64_t>* labels = nullptr) {
  hid_t sp = H5Screate_simple(int(dims.size()), dims.data(), nullptr);
  hid_t d = H5Dcreate2(f, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  size_t n = 1;
  for (auto x : dims) n *= x;
  if (labels) {
    H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels->data());
  } else {
    std::vector<double> zeros(n, 0.0);
    H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data());
  }
  H5Dclose(d);
  H5Sclose(sp);
}

struct Spec {
  bool images = true, labels = true;
  hid_t image_type = H5T_NATIVE_UINT8;
  std::vector<hsize_t> image_dims = {4, 1, 3, 3};
  std::vector<int64_t> label_values = {0, 1, 2, 1};
  int64_t num_classes = 3;
};

std::string make_file(const TempDir& dir, const std::string& name, const Spec& s) {
  std::string path = dir / name;
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (s.images) add_dataset(f, "images", s.image_type, s.image_dims);
  if (s.labels) add_dataset(f, "labels", H5T_NATIVE_INT64, {hsize_t(s.label_values.size())}, &s.label_values);
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(f, "num_classes", H5T_NATIVE_INT64, sp, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_INT64, &s.num_classes);
  H5Aclose(a);
  H5Sclose(sp);
  H5Fclose(f);
  return path;
}

std::string open_error(const std::string& path) {
  try {
    H5Dataset::open(path);
  } catch (const hpctrain::Error& e) {
    std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << "error must be one line: " << m;
    return m;
  }
  return "no error";
}

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

}  // namespace

TEST(H5Dataset, ValidFileOpensWithShapeAndClasses) {
  TempDir d;
  auto p = make_file(d, "ok.h5", Spec{});
  auto ds = H5Dataset::open(p);
  EXPECT_EQ(ds.info().size, 4);
  EXPECT_EQ(ds.info().sample_shape, (std::vector<int64_t>{1, 3, 3}));
  EXPECT_EQ(ds.info().num_classes, 3);
  EXPECT_FALSE(ds.info().has_stats);
  EXPECT_EQ(ds.info().mean, (std::vector<float>{0.f}));
  // uint8 [N,H,W] image files are seen as one channel; float data keeps its shape.
  Spec s;
  s.image_dims = {4, 5, 6};
  EXPECT_EQ(H5Dataset::open(make_file(d, "hw8.h5", s)).info().sample_shape, (std::vector<int64_t>{1, 5, 6}));
  s.image_type = H5T_NATIVE_FLOAT;
  auto ds2 = H5Dataset::open(make_file(d, "hw.h5", s));
  EXPECT_EQ(ds2.info().sample_shape, (std::vector<int64_t>{5, 6}));
  EXPECT_FALSE(ds2.info().uint8_pixels);
  EXPECT_EQ(ds2.info().input_dtype, "float32");
}

TEST(H5Dataset, MissingFile) {
  EXPECT_HAS(open_error("/nonexistent/x.h5"), "data file /nonexistent/x.h5 does not exist");
}

TEST(H5Dataset, NotHdf5) {
  TempDir d;
  std::ofstream(d / "plain.h5") << "this is not hdf5\n";
  EXPECT_HAS(open_error(d / "plain.h5"), "plain.h5 is not an HDF5 file");
}

TEST(H5Dataset, TruncatedFile) {
  TempDir d;
  hpctrain::SyntheticSpec spec;
  hpctrain::write_synthetic(d.path(), spec);
  auto p = d / "train.h5";
  auto size = std::filesystem::file_size(p);
  std::filesystem::resize_file(p, size / 2);
  auto msg = open_error(p);
  EXPECT_TRUE(msg.find("corrupt or truncated") != std::string::npos ||
              msg.find("is not an HDF5 file") != std::string::npos)
      << msg;
  EXPECT_HAS(msg, "train.h5");
}

TEST(H5Dataset, MissingDatasets) {
  TempDir d;
  Spec s;
  s.images = false;
  EXPECT_HAS(open_error(make_file(d, "a.h5", s)), "a.h5: dataset 'images' not found");
  s = Spec{};
  s.labels = false;
  EXPECT_HAS(open_error(make_file(d, "b.h5", s)), "b.h5: dataset 'labels' not found");
  // Configurable names.
  auto p = make_file(d, "c.h5", Spec{});
  try {
    H5Dataset::open(p, "x", "labels");
    ADD_FAILURE() << "no error";
  } catch (const hpctrain::Error& e) {
    EXPECT_HAS(std::string(e.what()), "dataset 'x' not found");
  }
}

TEST(H5Dataset, AnySampleShapeButNotScalars) {
  TempDir d;
  Spec s;
  s.image_dims = {4};
  EXPECT_HAS(open_error(make_file(d, "r1.h5", s)),
             "'images' has shape [4]; expected [N, d1..dk] with k >= 1 sample dims");
  s.image_dims = {4, 9};  // vectors: kept as they are
  EXPECT_EQ(hpctrain::H5Dataset::open(make_file(d, "r2.h5", s)).info().sample_shape, (std::vector<int64_t>{9}));
  s.image_dims = {4, 1, 1, 1, 1, 2};
  EXPECT_EQ(hpctrain::H5Dataset::open(make_file(d, "r6.h5", s)).info().sample_shape,
            (std::vector<int64_t>{1, 1, 1, 1, 2}));
}

TEST(H5Dataset, UnsupportedDtype) {
  TempDir d;
  Spec s;
  s.image_type = H5T_NATIVE_DOUBLE;
  EXPECT_HAS(open_error(make_file(d, "f64.h5", s)), "'images' has dtype float64; supported: uint8, float16, float32");
  s.image_type = H5T_NATIVE_INT16;
  EXPECT_HAS(open_error(make_file(d, "i16.h5", s)), "dtype int16");
}

TEST(H5Dataset, LabelCountMismatch) {
  TempDir d;
  Spec s;
  s.label_values = {0, 1, 2};
  EXPECT_HAS(open_error(make_file(d, "n.h5", s)), "'labels' has 3 entries but 'images' has 4 samples");
}

TEST(H5Dataset, LabelsOutOfRange) {
  TempDir d;
  Spec s;
  s.label_values = {0, 1, 3, 1};
  EXPECT_HAS(open_error(make_file(d, "hi.h5", s)), "label 3 at index 2 is outside [0, 3)");
  s.label_values = {0, -1, 2, 1};
  EXPECT_HAS(open_error(make_file(d, "lo.h5", s)), "label -1 at index 1 is outside [0, 3)");
}

TEST(H5Dataset, ValuesRoundTripExactlyAndReadsAreCoalesced) {
  TempDir d;
  hpctrain::SyntheticSpec spec;
  spec.channels = 2, spec.height = 3, spec.width = 5, spec.classes = 3, spec.train_size = 40;
  hpctrain::write_synthetic(d.path(), spec);
  auto ref = hpctrain::make_synthetic(spec, spec.train_size, 0);
  // Held in memory (small: read whole at the first batch) and read per batch from the file.
  for (int64_t in_memory_max : {H5Dataset::kInMemoryBudget, int64_t{0}}) {
    auto ds = H5Dataset::open(d / "train.h5", "images", "labels", 0, false, in_memory_max);
    EXPECT_EQ(ds.info().sample_shape, (std::vector<int64_t>{2, 3, 5}));
    EXPECT_EQ(ds.labels(), ref.labels);
    EXPECT_TRUE(ds.info().has_stats);
    std::vector<float> mean, std;
    hpctrain::channel_mean_std(ref, &mean, &std);
    EXPECT_EQ(ds.info().mean, mean);
    EXPECT_EQ(ds.info().std, std);
    // Scattered, with a repeat: runs {3,4,5}, {9}, {9}, {20,21}, {39}.
    std::vector<int64_t> idx = {3, 4, 5, 9, 9, 20, 21, 39};
    const int64_t numel = 30;
    std::vector<float> out(idx.size() * numel);
    for (int round = 1; round <= 2; ++round) {
      std::fill(out.begin(), out.end(), -1.f);
      ds.read(idx, out.data());
      // One H5Dread per batch from the file (coalesced); in memory: one for the whole file.
      EXPECT_EQ(ds.read_calls(), in_memory_max ? 1 : round) << in_memory_max;
      for (size_t i = 0; i < idx.size(); ++i)
        for (int64_t k = 0; k < numel; ++k)
          ASSERT_EQ(out[i * numel + k], float(ref.images[idx[i] * numel + k])) << "sample " << idx[i];
    }
    EXPECT_THROW(ds.read({40}, out.data()), hpctrain::Error);
    EXPECT_THROW(ds.read({-1}, out.data()), hpctrain::Error);
  }
}
