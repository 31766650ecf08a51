// One HDF5 file written at disk speed (internal to src/ckpt): shards and merged .h5 files.
//
// How (compressed files: all in memory with HDF5's core driver, copied out with
// H5Fget_file_image): HDF5 builds the file's structure in an unlinked scratch file (/dev/shm, else $TMPDIR or
// /tmp) through its default driver. Each non-empty tensor's storage is allocated contiguous but
// never written there (a hole: it costs no memory); at write time its bytes come straight from
// the tensor's own memory, spliced between the file's metadata regions. One sequential pass over
// the file's bytes, in 1 MiB blocks while they are in cache, computes the XXH3 of the whole file
// and of each tensor and write()s them; then one fsync (or none: the caller fsyncs it later,
// with the other files of a commit).
// So the tensor bytes are read once, never copied in user space, and memory holds only the
// metadata (plus the data of compressed datasets, which HDF5 must deflate itself) of one file.
// The metadata of a layout (names, dtypes, shapes, root attributes) is kept and reused byte for
// byte by the next file with that layout (up to 16 layouts; not for compressed files).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace hpctrain::ckpt {

struct FileDigest {
  int64_t bytes = 0;
  std::string xxh3;  // 16 hex digits over the whole file
};

struct WrittenFile : FileDigest {
  std::vector<std::string> tensor_xxh3;  // per spec tensor, computed in the same pass
  std::vector<int64_t> tensor_offsets;   // where its bytes lie in the file; -1 if HDF5 wrote
                                         // them (compressed) or it has none (empty)
};

struct H5FileSpec {
  // (dataset path, contiguous CPU tensor); written in this order.
  const std::vector<std::pair<std::string, at::Tensor>>* tensors = nullptr;
  std::vector<std::pair<std::string, std::string>> root_attrs;  // string attributes on "/"
  bool compress = false;                                        // chunked + deflate (level 4): data goes through HDF5
  bool sync = true;                                             // fsync before returning
  // Called after the first dataset is created (fault injection for crash tests), may be empty.
  std::function<void()> after_first_dataset;
};

// Writes `path` (created or truncated) and, with spec.sync, fsyncs it (not its directory). Throws
// hpctrain::Error naming the path ("write P failed: No space left on device"); a partial file
// is removed.
WrittenFile write_h5_file(const std::string& path, const H5FileSpec& spec);

// XXH3 and size of a whole file, streamed in 4 MiB reads; throws naming the path.
FileDigest digest_file(const std::string& path);

}  // namespace hpctrain::ckpt
