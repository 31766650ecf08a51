// Tensors <-> HDF5 datasets (internal to src/ckpt). The dtype encoding is described in
// checkpoint.h; every dataset gets a string attribute "dtype" with the torch dtype name,
// which is what the reader trusts (so bf16 stored as uint16 comes back as bf16).
#pragma once

#include <ATen/core/Tensor.h>
#include <hdf5.h>

#include <string>
#include <vector>

namespace hpctrain::ckpt {

// Owns one HDF5 identifier and closes it with the right H5*close.
class H5Id {
 public:
  H5Id() = default;
  H5Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  H5Id(H5Id&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  H5Id& operator=(H5Id&& o) noexcept;
  ~H5Id() { reset(); }
  void reset();
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

// Opens/creates a file; throws hpctrain::Error naming the path. HDF5's own error stack
// printing is silenced once per process (our errors say what failed).
H5Id create_h5(const std::string& path);
H5Id open_h5(const std::string& path);
// Flushes, closes and fsyncs the file (so the bytes are durable before a rename).
void close_and_sync(H5Id& file, const std::string& path);

// torch dtype name <-> ScalarType ("float32", "bfloat16", "bool", ...).
std::string dtype_name(at::ScalarType t);
at::ScalarType dtype_from_name(const std::string& name);

// Writes a contiguous CPU tensor as dataset `name` (intermediate groups created).
void write_tensor(hid_t file, const std::string& name, const at::Tensor& t, bool compress);

// Reads dataset `name` as a CPU tensor of its stored torch dtype and shape.
at::Tensor read_tensor(hid_t file, const std::string& name);

// Every dataset path in the file (e.g. "model/fc.weight"), in HDF5 visiting order.
std::vector<std::string> list_datasets(hid_t file);

// Byte offset of a contiguous dataset's data within the file (for corruption tests), or -1.
int64_t dataset_file_offset(hid_t file, const std::string& name);

// 64-bit XXH3 of a contiguous CPU tensor's bytes, as 16 lowercase hex digits.
std::string checksum(const at::Tensor& t);

}  // namespace hpctrain::ckpt
