// Writes hpctrain's image HDF5 layout: contiguous datasets (the loader reads random samples;
// no chunk cache in the way), per-channel mean/std summed exactly in integers per plane, and
// the train/test pair written under temporary names, then renamed.
#include "dataset/prep/h5_writer.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "io/h5_util.h"
#include "runtime/check.h"

namespace hpctrain {

void channel_mean_std(const ImageSet& s, std::vector<float>* mean, std::vector<float>* std) {
  const int64_t c = s.sample_shape.at(0);
  const int64_t plane = s.sample_shape.at(1) * s.sample_shape.at(2);
  std::vector<double> sum(c, 0), sq(c, 0);
  for (int64_t i = 0; i < s.size(); ++i)
    for (int64_t ch = 0; ch < c; ++ch) {
      const uint8_t* p = s.images.data() + (i * c + ch) * plane;
      // Integer sums per plane are exact; doubles only across planes.
      uint64_t a = 0, b = 0;
      for (int64_t k = 0; k < plane; ++k) a += p[k], b += uint64_t(p[k]) * p[k];
      sum[ch] += double(a), sq[ch] += double(b);
    }
  const double n = double(s.size()) * double(plane);
  mean->assign(c, 0.f);
  std->assign(c, 0.f);
  for (int64_t ch = 0; ch < c; ++ch) {
    double m = sum[ch] / n / 255.0;
    double var = sq[ch] / n / (255.0 * 255.0) - m * m;
    (*mean)[ch] = float(m);
    (*std)[ch] = float(std::sqrt(std::max(var, 0.0)));
  }
}

void write_image_h5(const std::string& path, const ImageSet& s, const DatasetAttrs& attrs) {
  if (s.sample_shape.size() != 3) throw Error("write " + path + ": sample shape must be C,H,W");
  const hsize_t n = static_cast<hsize_t>(s.size());
  auto g = h5::lock();
  h5::silence_errors();
  h5::Handle f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!f.valid()) throw Error("cannot create HDF5 file " + path);
  auto fail = [&](const char* what) { throw Error("writing " + path + ": " + what + " failed"); };
  // Contiguous (unchunked, uncompressed) layout: the loader reads random samples, and contiguous
  // storage makes each coalesced run one direct read without a chunk cache in the way.
  hsize_t idims[4] = {n, hsize_t(s.sample_shape[0]), hsize_t(s.sample_shape[1]), hsize_t(s.sample_shape[2])};
  h5::Handle isp(H5Screate_simple(4, idims, nullptr));
  h5::Handle ids(H5Dcreate2(f.get(), "images", H5T_STD_U8LE, isp.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!ids.valid()) fail("creating images");
  if (n && H5Dwrite(ids.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, s.images.data()) < 0)
    fail("writing images");
  h5::Handle lsp(H5Screate_simple(1, &n, nullptr));
  h5::Handle lds(H5Dcreate2(f.get(), "labels", H5T_STD_I64LE, lsp.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!lds.valid()) fail("creating labels");
  if (n && H5Dwrite(lds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, s.labels.data()) < 0)
    fail("writing labels");
  h5::write_attr_string(f.get(), "source", attrs.source);
  h5::write_attr_strings(f.get(), "class_names", attrs.class_names);
  h5::write_attr_int64(f.get(), "num_classes", int64_t(attrs.class_names.size()));
  h5::write_attr_floats(f.get(), "mean", attrs.mean);
  h5::write_attr_floats(f.get(), "std", attrs.std);
  if (H5Fflush(f.get(), H5F_SCOPE_GLOBAL) < 0) fail("flushing");
}

void write_split_pair(const std::string& dir,
                      const std::function<void(const std::string& path, bool is_train)>& write) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create output directory " + dir + ": " + ec.message());
  const std::string suffix = ".tmp." + std::to_string(::getpid());
  const fs::path final_train = fs::path(dir) / "train.h5", final_test = fs::path(dir) / "test.h5";
  const std::string tmp_train = final_train.string() + suffix, tmp_test = final_test.string() + suffix;
  try {
    write(tmp_train, true);
    write(tmp_test, false);
    fs::rename(tmp_train, final_train);
    fs::rename(tmp_test, final_test);
  } catch (const fs::filesystem_error& e) {
    fs::remove(tmp_train, ec), fs::remove(tmp_test, ec);
    throw Error("cannot move output into " + dir + ": " + e.what());
  } catch (...) {
    fs::remove(tmp_train, ec), fs::remove(tmp_test, ec);
    throw;
  }
}

void write_train_test(const std::string& dir, const ImageSet& train, const ImageSet& test, DatasetAttrs attrs) {
  if (attrs.mean.empty()) channel_mean_std(train, &attrs.mean, &attrs.std);
  write_split_pair(
      dir, [&](const std::string& path, bool is_train) { write_image_h5(path, is_train ? train : test, attrs); });
}

}  // namespace hpctrain
