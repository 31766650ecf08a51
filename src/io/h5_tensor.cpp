// Tensors <-> HDF5 datasets. Why custom types: HDF5 1.10 has no predefined half float (we
// build IEEE binary16, which h5py maps to float16) and no bool (we use h5py's own bool
// encoding, an int8 enum FALSE=0/TRUE=1). bfloat16 has no h5py equivalent: raw uint16 bits.
#include "io/h5_tensor.h"

#include "runtime/tensor_text.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "runtime/check.h"
#include "runtime/host_tensor.h"

namespace hpctrain::h5 {
namespace {

[[noreturn]] void fail(const std::string& what) { throw Error(what); }

Handle half_type() {
  hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(t, 15, 10, 5, 0, 10);
  H5Tset_size(t, 2);
  H5Tset_ebias(t, 15);
  return Handle(t);
}

Handle bool_type() {
  hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
  int8_t f = 0, tr = 1;
  H5Tenum_insert(t, "FALSE", &f);
  H5Tenum_insert(t, "TRUE", &tr);
  return Handle(t);
}

// The HDF5 file type for a torch dtype (also used as memory type: all little-endian here).
Handle h5_type(at::ScalarType st) {
  switch (st) {
    case at::kFloat: return Handle(H5Tcopy(H5T_IEEE_F32LE));
    case at::kDouble: return Handle(H5Tcopy(H5T_IEEE_F64LE));
    case at::kHalf: return half_type();
    case at::kBFloat16: return Handle(H5Tcopy(H5T_STD_U16LE));
    case at::kInt: return Handle(H5Tcopy(H5T_STD_I32LE));
    case at::kLong: return Handle(H5Tcopy(H5T_STD_I64LE));
    case at::kByte: return Handle(H5Tcopy(H5T_STD_U8LE));
    case at::kBool: return bool_type();
    default: fail(std::string("checkpoint: unsupported dtype ") + c10::toString(st));
  }
}

// Creates every missing group on the way to `name`'s parent, without timestamps.
void create_parent_groups(hid_t file, const std::string& name) {
  Handle gcpl(H5Pcreate(H5P_GROUP_CREATE));
  H5Pset_obj_track_times(gcpl.get(), 0);
  for (size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1)) {
    std::string group = name.substr(0, slash);
    if (group.empty() || H5Lexists(file, group.c_str(), H5P_DEFAULT) > 0) continue;
    Handle g(H5Gcreate2(file, group.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT));
    if (!g.valid()) fail("cannot create group " + printable(group));
  }
}

}  // namespace

Handle open_h5(const std::string& path) {
  auto g = lock();
  silence_errors();
  Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid()) fail("cannot open HDF5 file " + path + " (missing or not HDF5)");
  return f;
}

std::string stored_dtype_name(at::ScalarType t) {
  // The names are the communicator's (one table for the project); checkpoints store a subset.
  switch (t) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kInt:
    case at::kLong:
    case at::kByte:
    case at::kBool: return hpctrain::dtype_name(t);
    default: fail(std::string("checkpoint: unsupported dtype ") + c10::toString(t));
  }
}

at::ScalarType dtype_from_name(const std::string& n) {
  static const std::pair<const char*, at::ScalarType> table[] = {
      {"float32", at::kFloat}, {"float64", at::kDouble}, {"float16", at::kHalf}, {"bfloat16", at::kBFloat16},
      {"int32", at::kInt},     {"int64", at::kLong},     {"uint8", at::kByte},   {"bool", at::kBool}};
  for (auto& [name, st] : table)
    if (n == name) return st;
  fail("checkpoint: unknown dtype '" + printable(n) + "'");
}

namespace {

// create_dataset of a tensor's dtype and shape; with write_data, `data` holds its bytes.
int64_t create_impl(hid_t file, const std::string& name, at::ScalarType dtype, at::IntArrayRef shape, bool compress,
                    bool write_data, const void* data) {
  auto g = lock();
  silence_errors();
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space(shape.empty() ? H5Screate(H5S_SCALAR)
                             : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_obj_track_times(dcpl.get(), 0);
  const int64_t numel = c10::multiply_integers(shape);
  bool empty = numel == 0;
  if (write_data && compress && !shape.empty() && !empty) {
    // Chunks of whole trailing rows, about 1 MiB, so deflate works on sizeable blocks.
    std::vector<hsize_t> chunk = dims;
    int64_t row = numel / shape[0] * static_cast<int64_t>(c10::elementSize(dtype));
    chunk[0] = std::max<hsize_t>(1, std::min<hsize_t>(dims[0], (1 << 20) / std::max<int64_t>(row, 1)));
    H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
    H5Pset_deflate(dcpl.get(), 4);
  } else if (!write_data) {
    // Storage allocated now, never filled by HDF5: the caller's bytes go there.
    H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY);
    H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
  }
  create_parent_groups(file, name);
  Handle type = h5_type(dtype);
  Handle ds(H5Dcreate2(file, name.c_str(), type.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  if (!ds.valid()) fail("cannot create dataset " + printable(name));
  h5::write_attr_string(ds.get(), "dtype", stored_dtype_name(dtype));
  if (empty) return -1;
  if (write_data) {
    if (H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
      fail("cannot write dataset " + printable(name));
    return -1;
  }
  haddr_t off = H5Dget_offset(ds.get());
  if (off == HADDR_UNDEF) fail("dataset " + printable(name) + " has no contiguous storage");
  return static_cast<int64_t>(off);
}

}  // namespace

int64_t create_dataset(hid_t file, const std::string& name, const at::Tensor& t, bool compress, bool write_data) {
  TORCH_CHECK(t.device().is_cpu() && t.is_contiguous(), "create_dataset needs a contiguous CPU tensor");
  return create_impl(file, name, t.scalar_type(), t.sizes(), compress, write_data, t.numel() ? t.data_ptr() : nullptr);
}

int64_t create_dataset(hid_t file, const std::string& name, at::ScalarType dtype, at::IntArrayRef shape) {
  return create_impl(file, name, dtype, shape, false, false, nullptr);
}

// Opens dataset `name` of `file` and reads its hpctrain dtype attribute (the caller holds the lock).
static Handle open_typed(hid_t file, const std::string& name, at::ScalarType* st) {
  silence_errors();
  if (H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0) fail("dataset " + printable(name) + " is missing");
  Handle ds(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  if (!ds.valid()) fail("cannot open dataset " + printable(name));
  std::string dt;
  if (!h5::read_attr_string(ds.get(), "dtype", &dt)) fail("dataset " + printable(name) + " has no dtype attribute");
  *st = dtype_from_name(dt);
  return ds;
}

at::Tensor read_tensor(hid_t file, const std::string& name) {
  auto g = lock();
  at::ScalarType st;
  Handle ds = open_typed(file, name, &st);
  Handle space(H5Dget_space(ds.get()));
  int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) fail("dataset " + printable(name) + ": unreadable shape");
  std::vector<hsize_t> dims(rank);
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  at::Tensor t = empty_unpooled(std::vector<int64_t>(dims.begin(), dims.end()), st);
  Handle type = h5_type(st);
  if (t.numel() > 0 && H5Dread(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data_ptr()) < 0)
    fail("cannot read dataset " + printable(name));
  return t;
}

at::Tensor read_tensor_range(hid_t file, const std::string& name, int64_t begin, int64_t count) {
  auto g = lock();
  at::ScalarType st;
  Handle ds = open_typed(file, name, &st);
  Handle space(H5Dget_space(ds.get()));
  hsize_t n = 0;
  if (H5Sget_simple_extent_ndims(space.get()) != 1 || H5Sget_simple_extent_dims(space.get(), &n, nullptr) != 1)
    fail("dataset " + printable(name) + " is not one-dimensional");
  if (begin < 0 || count < 0 || static_cast<hsize_t>(begin + count) > n)
    fail("dataset " + printable(name) + ": elements [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
         ") are outside its " + std::to_string(n));
  at::Tensor t = empty_unpooled({count}, st);
  if (count == 0) return t;
  hsize_t start = static_cast<hsize_t>(begin), len = static_cast<hsize_t>(count);
  Handle mem(H5Screate_simple(1, &len, nullptr));
  Handle type = h5_type(st);
  if (H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, &start, nullptr, &len, nullptr) < 0 ||
      H5Dread(ds.get(), type.get(), mem.get(), space.get(), H5P_DEFAULT, t.data_ptr()) < 0)
    fail("cannot read dataset " + printable(name));
  return t;
}

std::vector<std::string> list_datasets(hid_t file) {
  auto g = lock();
  silence_errors();
  std::vector<std::string> out;
  auto visit = [](hid_t, const char* name, const H5O_info_t* info, void* op) -> herr_t {
    if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(op)->push_back(name);
    return 0;
  };
  if (H5Ovisit(file, H5_INDEX_NAME, H5_ITER_NATIVE, visit, &out) < 0) fail("cannot list datasets");
  return out;
}

int64_t dataset_file_offset(hid_t file, const std::string& name) {
  auto g = lock();
  silence_errors();
  Handle ds(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  if (!ds.valid()) return -1;
  haddr_t off = H5Dget_offset(ds.get());
  return off == HADDR_UNDEF ? -1 : static_cast<int64_t>(off);
}

}  // namespace hpctrain::h5
