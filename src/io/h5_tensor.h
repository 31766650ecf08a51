// Tensors <-> HDF5 datasets: the torch dtype <-> HDF5 type mapping of hpctrain's files (used by
// src/ckpt for shards and merged files). The dtype encoding is described in ckpt/checkpoint.h;
// every dataset gets a string attribute "dtype" with the torch dtype name, which is what the
// reader trusts (so bf16 stored as uint16 comes back as bf16).
// Every function takes h5::lock() (io/h5_util.h: the one HDF5 layer of hpctrain) and
// silences HDF5's error printing on the calling thread.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "io/h5_util.h"

namespace hpctrain::h5 {

// Opens a file read-only; throws hpctrain::Error naming the path.
h5::Handle open_h5(const std::string& path);

// The dtypes a checkpoint stores, by the project's names (runtime/tensor_text.h) <-> ScalarType;
// any other dtype throws hpctrain::Error naming it.
std::string stored_dtype_name(at::ScalarType t);
at::ScalarType dtype_from_name(const std::string& name);

// Creates dataset `name` (groups created as needed; no object timestamps, so the same tensors
// give the same bytes) for a contiguous CPU tensor. With `write_data` the tensor's bytes go
// through H5Dwrite (chunked + deflate with `compress`) and -1 is returned. Without it, the
// storage is allocated contiguous and left unwritten, and its byte offset in the file is
// returned: the caller supplies those bytes (see h5_image.h). An empty tensor has no storage
// (returns -1 either way).
int64_t create_dataset(hid_t file, const std::string& name, const at::Tensor& t, bool compress, bool write_data);

// The same for a dtype and shape alone, storage allocated and left unwritten (as with
// write_data false): the same bytes as that call, for a caller that has no tensor yet.
int64_t create_dataset(hid_t file, const std::string& name, at::ScalarType dtype, at::IntArrayRef shape);

// Reads dataset `name` as a CPU tensor of its stored torch dtype and shape, in memory from
// empty_unpooled (runtime/host_tensor.h: returned to the system as soon as the tensor is freed,
// so reading tensors one at a time holds one).
at::Tensor read_tensor(hid_t file, const std::string& name);
// Elements [begin, begin + count) of the one-dimensional dataset `name` (a partial read: only
// those bytes are read); throws hpctrain::Error for another rank or a range outside it.
at::Tensor read_tensor_range(hid_t file, const std::string& name, int64_t begin, int64_t count);

// Every dataset path in the file (e.g. "model/fc.weight"), in HDF5 visiting order.
std::vector<std::string> list_datasets(hid_t file);

// Byte offset of a contiguous dataset's data within the file (for corruption tests), or -1.
int64_t dataset_file_offset(hid_t file, const std::string& name);

}  // namespace hpctrain::h5
