// Tensors <-> HDF5 datasets. Why custom types: HDF5 1.10 has no predefined half float (we
// build IEEE binary16, which h5py maps to float16) and no bool (we use h5py's own bool
// encoding, an int8 enum FALSE=0/TRUE=1). bfloat16 has no h5py equivalent: raw uint16 bits.
#include "ckpt/h5_tensor.h"

#include "comm/communicator.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "runtime/check.h"

namespace hpctrain::ckpt {
namespace {

// Per thread: in thread-safe HDF5 builds the automatic error printing is a per-thread setting,
// and checkpoints are written from a background thread (else a full disk prints HDF5's
// multi-line error stack next to our one-line error).
void silence_hdf5() {
  thread_local bool silenced = false;
  if (!silenced) H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  silenced = true;
}

[[noreturn]] void fail(const std::string& what) { throw Error(what); }


H5Id half_type() {
  hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(t, 15, 10, 5, 0, 10);
  H5Tset_size(t, 2);
  H5Tset_ebias(t, 15);
  return H5Id(t, H5Tclose);
}

H5Id bool_type() {
  hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
  int8_t f = 0, tr = 1;
  H5Tenum_insert(t, "FALSE", &f);
  H5Tenum_insert(t, "TRUE", &tr);
  return H5Id(t, H5Tclose);
}

// The HDF5 file type for a torch dtype (also used as memory type: all little-endian here).
H5Id h5_type(at::ScalarType st) {
  switch (st) {
    case at::kFloat: return H5Id(H5Tcopy(H5T_IEEE_F32LE), H5Tclose);
    case at::kDouble: return H5Id(H5Tcopy(H5T_IEEE_F64LE), H5Tclose);
    case at::kHalf: return half_type();
    case at::kBFloat16: return H5Id(H5Tcopy(H5T_STD_U16LE), H5Tclose);
    case at::kInt: return H5Id(H5Tcopy(H5T_STD_I32LE), H5Tclose);
    case at::kLong: return H5Id(H5Tcopy(H5T_STD_I64LE), H5Tclose);
    case at::kByte: return H5Id(H5Tcopy(H5T_STD_U8LE), H5Tclose);
    case at::kBool: return bool_type();
    default: fail(std::string("checkpoint: unsupported dtype ") + c10::toString(st));
  }
}

void write_dtype_attr(hid_t ds, const std::string& value) {
  H5Id str(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(str, value.size());
  H5Id space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Id attr(H5Acreate2(ds, "dtype", str, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (attr.get() < 0 || H5Awrite(attr, str, value.data()) < 0)
    fail("checkpoint: cannot write dtype attribute");
}

std::string read_dtype_attr(hid_t ds, const std::string& name) {
  if (H5Aexists(ds, "dtype") <= 0) fail("dataset " + name + " has no dtype attribute");
  H5Id attr(H5Aopen(ds, "dtype", H5P_DEFAULT), H5Aclose);
  H5Id type(H5Aget_type(attr), H5Tclose);
  size_t n = H5Tget_size(type);
  std::string s(n, '\0');
  H5Id mem(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(mem, n);
  if (H5Aread(attr, mem, s.data()) < 0) fail("dataset " + name + ": cannot read dtype attribute");
  s.resize(std::strlen(s.c_str()));
  return s;
}

}  // namespace

H5Id& H5Id::operator=(H5Id&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    close_ = o.close_;
    o.id_ = -1;
  }
  return *this;
}

void H5Id::reset() {
  if (id_ >= 0 && close_) close_(id_);
  id_ = -1;
}

H5Id create_h5(const std::string& path) {
  silence_hdf5();
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) fail("cannot create HDF5 file " + path);
  return H5Id(f, H5Fclose);
}

H5Id open_h5(const std::string& path) {
  silence_hdf5();
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) fail("cannot open HDF5 file " + path + " (missing or not HDF5)");
  return H5Id(f, H5Fclose);
}

void close_and_sync(H5Id& file, const std::string& path) {
  if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) fail("cannot flush " + path);
  file.reset();
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0 || ::fsync(fd) != 0) {
    if (fd >= 0) ::close(fd);
    fail("cannot fsync " + path);
  }
  ::close(fd);
}

std::string dtype_name(at::ScalarType t) {
  // The names are the communicator's (one table for the project); checkpoints store a subset.
  switch (t) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16:
    case at::kInt: case at::kLong: case at::kByte: case at::kBool:
      return hpctrain::dtype_name(t);
    default: fail(std::string("checkpoint: unsupported dtype ") + c10::toString(t));
  }
}

at::ScalarType dtype_from_name(const std::string& n) {
  static const std::pair<const char*, at::ScalarType> table[] = {
      {"float32", at::kFloat}, {"float64", at::kDouble}, {"float16", at::kHalf},
      {"bfloat16", at::kBFloat16}, {"int32", at::kInt}, {"int64", at::kLong},
      {"uint8", at::kByte}, {"bool", at::kBool}};
  for (auto& [name, st] : table)
    if (n == name) return st;
  fail("checkpoint: unknown dtype '" + n + "'");
}

void write_tensor(hid_t file, const std::string& name, const at::Tensor& t, bool compress) {
  TORCH_CHECK(t.device().is_cpu() && t.is_contiguous(), "write_tensor needs a contiguous CPU tensor");
  std::vector<hsize_t> dims(t.sizes().begin(), t.sizes().end());
  H5Id space(t.dim() == 0 ? H5Screate(H5S_SCALAR)
                          : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
             H5Sclose);
  H5Id lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl, 1);
  H5Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (compress && t.dim() > 0 && t.numel() > 0) {
    // Chunks of whole trailing rows, about 1 MiB, so deflate works on sizeable blocks.
    std::vector<hsize_t> chunk = dims;
    int64_t row = t.numel() / t.size(0) * t.element_size();
    chunk[0] = std::max<hsize_t>(1, std::min<hsize_t>(dims[0], (1 << 20) / std::max<int64_t>(row, 1)));
    H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
    H5Pset_deflate(dcpl, 4);
  }
  H5Id type = h5_type(t.scalar_type());
  H5Id ds(H5Dcreate2(file, name.c_str(), type, space, lcpl, dcpl, H5P_DEFAULT), H5Dclose);
  if (ds.get() < 0) fail("cannot create dataset " + name);
  if (t.numel() > 0 && H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data_ptr()) < 0)
    fail("cannot write dataset " + name);
  write_dtype_attr(ds, dtype_name(t.scalar_type()));
}

at::Tensor read_tensor(hid_t file, const std::string& name) {
  if (H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0) fail("dataset " + name + " is missing");
  H5Id ds(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (ds.get() < 0) fail("cannot open dataset " + name);
  at::ScalarType st = dtype_from_name(read_dtype_attr(ds, name));
  H5Id space(H5Dget_space(ds), H5Sclose);
  int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(std::max(rank, 0));
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  at::Tensor t = at::empty(std::vector<int64_t>(dims.begin(), dims.end()), at::TensorOptions(st));
  H5Id type = h5_type(st);
  if (t.numel() > 0 && H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data_ptr()) < 0)
    fail("cannot read dataset " + name);
  return t;
}

std::vector<std::string> list_datasets(hid_t file) {
  std::vector<std::string> out;
  auto visit = [](hid_t, const char* name, const H5O_info_t* info, void* op) -> herr_t {
    if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(op)->push_back(name);
    return 0;
  };
  if (H5Ovisit(file, H5_INDEX_NAME, H5_ITER_NATIVE, visit, &out) < 0) fail("cannot list datasets");
  return out;
}

int64_t dataset_file_offset(hid_t file, const std::string& name) {
  H5Id ds(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (ds.get() < 0) return -1;
  haddr_t off = H5Dget_offset(ds);
  return off == HADDR_UNDEF ? -1 : static_cast<int64_t>(off);
}

std::string checksum(const at::Tensor& t) {
  TORCH_CHECK(t.device().is_cpu() && t.is_contiguous(), "checksum needs a contiguous CPU tensor");
  XXH64_hash_t h = XXH3_64bits(t.numel() ? t.data_ptr() : nullptr, t.nbytes());
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace hpctrain::ckpt
