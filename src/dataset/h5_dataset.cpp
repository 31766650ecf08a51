// H5Dataset: validates a data file on open (shapes, dtypes, labels), then reads a batch with
// one H5Dread over the union of its runs' hyperslabs, or copies it from a whole-dataset read
// kept under a process-wide byte budget. Also DatasetInfo's element counts.
#include "dataset/h5_dataset.h"

#include <algorithm>
#include <atomic>
#include <filesystem>

#include "runtime/check.h"

namespace hpctrain {

int64_t DatasetInfo::sample_numel() const {
  int64_t n = 1;
  for (auto d : sample_shape) n *= d;
  return n;
}

int64_t DatasetInfo::target_numel() const {
  int64_t n = 1;
  for (auto d : target_shape) n *= d;
  return n;
}

namespace {

std::string shape_str(const std::vector<hsize_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

h5::Handle open_dataset(hid_t file, const std::string& path, const std::string& name) {
  if (H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0) throw Error(path + ": dataset '" + name + "' not found");
  h5::Handle d(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  if (!d.valid()) throw Error(path + ": '" + name + "' is not a readable dataset");
  return d;
}

std::vector<hsize_t> dims_of(hid_t ds) {
  h5::Handle sp(H5Dget_space(ds));
  int rank = H5Sget_simple_extent_ndims(sp.get());
  std::vector<hsize_t> d(std::max(rank, 0));
  H5Sget_simple_extent_dims(sp.get(), d.data(), nullptr);
  return d;
}

bool is_float(hid_t t, size_t bytes) { return H5Tget_class(t) == H5T_FLOAT && H5Tget_size(t) == bytes; }

// Reads rows `sorted` (ascending, repeats allowed) of `ds` [N, ...] as float into
// out[i * row_numel ...] in the order given: the runs of consecutive rows are fetched with ONE
// H5Dread over the union of their hyperslabs. `u8` reads uint8 storage (values unscaled).
void read_rows(hid_t ds, bool u8, const std::vector<int64_t>& sorted, int64_t row_numel, int64_t rows,
               const std::string& what, float* out) {
  std::vector<int64_t> uniq(sorted);
  uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
  if (uniq.front() < 0 || uniq.back() >= rows)
    throw Error(what + ": sample index out of range [0, " + std::to_string(rows) + ")");
  auto g = h5::lock();
  h5::silence_errors();  // the automatic error printing is per thread in thread-safe builds
  h5::Handle fspace(H5Dget_space(ds));
  const int rank = H5Sget_simple_extent_ndims(fspace.get());
  std::vector<hsize_t> full(rank);
  H5Sget_simple_extent_dims(fspace.get(), full.data(), nullptr);
  std::vector<hsize_t> start(rank, 0), count(full);
  H5Sselect_none(fspace.get());
  for (size_t i = 0; i < uniq.size();) {
    size_t j = i + 1;
    while (j < uniq.size() && uniq[j] == uniq[j - 1] + 1) ++j;  // a run of consecutive samples
    start[0] = hsize_t(uniq[i]);
    count[0] = hsize_t(j - i);
    if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_OR, start.data(), nullptr, count.data(), nullptr) < 0)
      throw Error(what + ": selecting samples failed");
    i = j;
  }
  hsize_t mcount = hsize_t(uniq.size()) * hsize_t(row_numel);
  h5::Handle mspace(H5Screate_simple(1, &mcount, nullptr));
  std::vector<float> fbuf;
  std::vector<uint8_t> ubuf;
  void* dst;
  if (u8)
    ubuf.resize(mcount), dst = ubuf.data();
  else
    fbuf.resize(mcount), dst = fbuf.data();
  if (H5Dread(ds, u8 ? H5T_NATIVE_UINT8 : H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), H5P_DEFAULT, dst) < 0)
    throw Error(what + ": reading failed (corrupt or truncated file)");
  g.unlock();
  // Scatter (the union comes back in ascending order) and repeat duplicates.
  size_t u = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    while (uniq[u] != sorted[i]) ++u;
    float* o = out + i * row_numel;
    if (u8) {
      const uint8_t* src = ubuf.data() + u * row_numel;
      for (int64_t k = 0; k < row_numel; ++k) o[k] = float(src[k]);
    } else {
      std::copy_n(fbuf.data() + u * row_numel, row_numel, o);
    }
  }
}

}  // namespace

H5Dataset H5Dataset::open(const std::string& path, const std::string& images, const std::string& labels,
                          int64_t num_classes, bool regression, int64_t in_memory_max) {
  auto g = h5::lock();
  h5::silence_errors();
  if (!std::filesystem::exists(path)) throw Error("data file " + path + " does not exist");
  if (H5Fis_hdf5(path.c_str()) <= 0) throw Error(path + " is not an HDF5 file");
  H5Dataset ds;
  ds.in_memory_max_ = in_memory_max;
  ds.info_.path = path;
  ds.file_ = h5::Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!ds.file_.valid()) throw Error(path + ": cannot open as HDF5 (corrupt or truncated file)");
  ds.images_ = open_dataset(ds.file_.get(), path, images);

  auto idims = dims_of(ds.images_.get());
  if (idims.size() < 2)
    throw Error(path + ": dataset '" + images + "' has shape " + shape_str(idims) +
                "; expected [N, d1..dk] with k >= 1 sample dims");
  h5::Handle itype(H5Dget_type(ds.images_.get()));
  const bool u8 = H5Tget_class(itype.get()) == H5T_INTEGER && H5Tget_size(itype.get()) == 1 &&
                  H5Tget_sign(itype.get()) == H5T_SGN_NONE;
  const bool f16 = is_float(itype.get(), 2), f32 = is_float(itype.get(), 4);
  if (!u8 && !f16 && !f32)
    throw Error(path + ": dataset '" + images + "' has dtype " + h5::type_name(itype.get()) +
                "; supported: uint8, float16, float32");
  ds.info_.uint8_pixels = u8;
  ds.info_.input_dtype = u8 ? "uint8" : f16 ? "float16" : "float32";
  ds.info_.size = int64_t(idims[0]);
  if (idims.size() == 3 && u8) ds.info_.sample_shape.push_back(1);  // [N,H,W] images: one channel
  for (size_t i = 1; i < idims.size(); ++i) ds.info_.sample_shape.push_back(int64_t(idims[i]));

  if (H5Lexists(ds.file_.get(), labels.c_str(), H5P_DEFAULT) <= 0) {
    const char* other = regression ? "labels" : "targets";
    bool has_other = H5Lexists(ds.file_.get(), other, H5P_DEFAULT) > 0;
    std::string hint = !has_other   ? ""
                       : regression ? " (it has integer 'labels': use --loss cross_entropy)"
                                    : " (it has 'targets': use --loss mse for float targets)";
    throw Error(path + ": dataset '" + labels + "' not found" + hint);
  }
  h5::Handle lab = open_dataset(ds.file_.get(), path, labels);
  auto ldims = dims_of(lab.get());
  h5::Handle ltype(H5Dget_type(lab.get()));
  if (ldims.empty() || int64_t(ldims[0]) != ds.info_.size)
    throw Error(path + ": '" + labels + "' has " + std::to_string(ldims.empty() ? 0 : ldims[0]) + " entries but '" +
                images + "' has " + std::to_string(ds.info_.size) + " samples");
  if (regression) {
    if (H5Tget_class(ltype.get()) != H5T_FLOAT)
      throw Error(path + ": dataset '" + labels + "' has dtype " + h5::type_name(ltype.get()) +
                  "; regression targets must be float16/32/64 (integer class labels need --loss cross_entropy)");
    ds.info_.classification = false;
    for (size_t i = 1; i < ldims.size(); ++i) ds.info_.target_shape.push_back(int64_t(ldims[i]));
    ds.targets_ = std::move(lab);
  } else {
    if (ldims.size() != 1)
      throw Error(path + ": dataset '" + labels + "' has shape " + shape_str(ldims) + "; expected [N]");
    if (H5Tget_class(ltype.get()) != H5T_INTEGER)
      throw Error(path + ": dataset '" + labels + "' has dtype " + h5::type_name(ltype.get()) +
                  "; labels must be integers (float targets need --loss mse|l1|smooth_l1)");
    ds.labels_.resize(ds.info_.size);
    if (ds.info_.size && H5Dread(lab.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, ds.labels_.data()) < 0)
      throw Error(path + ": reading '" + labels + "' failed (corrupt or truncated file)");

    int64_t classes = num_classes;
    if (classes <= 0 && !h5::read_attr_int64(ds.file_.get(), "num_classes", &classes)) classes = 0;
    if (classes <= 0) {
      hid_t f = ds.file_.get();
      if (H5Aexists(f, "class_names") > 0) {
        h5::Handle a(H5Aopen(f, "class_names", H5P_DEFAULT));
        h5::Handle sp(H5Aget_space(a.get()));
        classes = H5Sget_simple_extent_npoints(sp.get());
      }
    }
    if (classes <= 0) classes = ds.labels_.empty() ? 0 : *std::max_element(ds.labels_.begin(), ds.labels_.end()) + 1;
    for (int64_t i = 0; i < ds.info_.size; ++i)
      if (ds.labels_[i] < 0 || ds.labels_[i] >= classes)
        throw Error(path + ": label " + std::to_string(ds.labels_[i]) + " at index " + std::to_string(i) +
                    " is outside [0, " + std::to_string(classes) + ")");
    ds.info_.num_classes = classes;
  }

  const size_t c = size_t(ds.info_.sample_shape[0]);
  ds.info_.has_stats = h5::read_attr_floats(ds.file_.get(), "mean", &ds.info_.mean) &&
                       h5::read_attr_floats(ds.file_.get(), "std", &ds.info_.std) &&
                       ds.info_.mean.size() == ds.info_.std.size() &&
                       (ds.info_.mean.size() == c || ds.info_.mean.size() == 1);
  if (!ds.info_.has_stats) ds.info_.mean.assign(c, 0.f), ds.info_.std.assign(c, 1.f);
  if (ds.info_.mean.size() == 1 && c > 1) {  // one value for every entry
    ds.info_.mean.assign(c, ds.info_.mean[0]);
    ds.info_.std.assign(c, ds.info_.std[0]);
  }
  return ds;
}

namespace {

std::atomic<int64_t> in_memory_bytes{0};

// Rows `sorted` of a cached dataset, as read_rows() gives them.
template <class T>
void copy_rows(const std::vector<T>& all, const std::vector<int64_t>& sorted, int64_t row_numel, int64_t rows,
               const std::string& what, float* out) {
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= rows)
      throw Error(what + ": sample index out of range [0, " + std::to_string(rows) + ")");
    const T* src = all.data() + sorted[i] * row_numel;
    float* o = out + i * row_numel;
    for (int64_t k = 0; k < row_numel; ++k) o[k] = float(src[k]);
  }
}

}  // namespace

bool reserve_in_memory(int64_t bytes) {
  if (in_memory_bytes.fetch_add(bytes) + bytes > H5Dataset::kInMemoryBudget) {
    in_memory_bytes.fetch_sub(bytes);
    return false;
  }
  return true;
}

void release_in_memory(int64_t bytes) { in_memory_bytes.fetch_sub(bytes); }

H5Dataset::RowCache::RowCache(RowCache&& o) noexcept : tried(o.tried), u8(std::move(o.u8)), f32(std::move(o.f32)) {
  o.u8.clear();
  o.f32.clear();
}

H5Dataset::RowCache& H5Dataset::RowCache::operator=(RowCache&& o) noexcept {
  if (this != &o) {
    in_memory_bytes.fetch_sub(bytes());
    tried = o.tried;
    u8 = std::move(o.u8);
    f32 = std::move(o.f32);
    o.u8.clear();
    o.f32.clear();
  }
  return *this;
}

H5Dataset::RowCache::~RowCache() { in_memory_bytes.fetch_sub(bytes()); }

void H5Dataset::fill_cache(RowCache& c, hid_t ds, bool u8, int64_t row_numel) const {
  c.tried = true;
  const int64_t n = info_.size * row_numel;
  const int64_t bytes = n * (u8 ? 1 : 4);
  if (n <= 0 || bytes > in_memory_max_) return;  // read per batch
  if (!reserve_in_memory(bytes)) return;
  ++read_calls_;
  auto g = h5::lock();
  h5::silence_errors();
  herr_t rc;
  if (u8) {
    c.u8.resize(size_t(n));
    rc = H5Dread(ds, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, c.u8.data());
  } else {
    c.f32.resize(size_t(n));
    rc = H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, c.f32.data());
  }
  if (rc < 0) {
    std::vector<uint8_t>().swap(c.u8);
    std::vector<float>().swap(c.f32);
    in_memory_bytes.fetch_sub(bytes);
    throw Error(info_.path + ": reading failed (corrupt or truncated file)");
  }
}

void H5Dataset::read(const std::vector<int64_t>& sorted, float* out) const {
  if (sorted.empty()) return;
  const std::string what = info_.path + " (inputs)";
  if (!inputs_cache_.tried) fill_cache(inputs_cache_, images_.get(), info_.uint8_pixels, info_.sample_numel());
  if (!inputs_cache_.u8.empty())
    return copy_rows(inputs_cache_.u8, sorted, info_.sample_numel(), info_.size, what, out);
  if (!inputs_cache_.f32.empty())
    return copy_rows(inputs_cache_.f32, sorted, info_.sample_numel(), info_.size, what, out);
  ++read_calls_;
  read_rows(images_.get(), info_.uint8_pixels, sorted, info_.sample_numel(), info_.size, what, out);
}

void H5Dataset::read_targets(const std::vector<int64_t>& sorted, float* out) const {
  if (sorted.empty()) return;
  if (!targets_.valid()) throw Error(info_.path + ": no float targets (a classification file)");
  const std::string what = info_.path + " (targets)";
  if (!targets_cache_.tried) fill_cache(targets_cache_, targets_.get(), false, info_.target_numel());
  if (!targets_cache_.f32.empty())
    return copy_rows(targets_cache_.f32, sorted, info_.target_numel(), info_.size, what, out);
  read_rows(targets_.get(), false, sorted, info_.target_numel(), info_.size, what, out);
}

}  // namespace hpctrain
