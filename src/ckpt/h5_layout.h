// The HDF5 structure of one file, built apart from its tensors' bytes (internal to src/ckpt:
// ckpt/h5_image.h writes shards and merged .h5 files from it, ckpt/merged_h5.h streams a
// merged .h5 into it).
//
// Contract:
// - build_h5_layout creates, in order, one dataset per spec (h5::create_dataset: storage
//   allocated contiguous and never written, so it is a hole that costs no memory) and the root
//   string attributes, in an unlinked scratch file (/dev/shm, else $TMPDIR or /tmp), and keeps
//   only the bytes between the datasets' storage ("segments", copied into `meta`).
//   With compress_data (one tensor per spec), HDF5 writes those tensors itself, chunked and
//   deflated, in memory (core driver): every byte is then in `meta`.
// - The bytes depend only on names, dtypes, shapes and attributes (no object times), so the
//   same input gives the same file. offsets[i] is where dataset i's bytes go, -1 when it has
//   none outside `meta` (empty, or compressed).
// - Throws hpctrain::Error naming `path` (used in messages only; nothing is written there).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/tensor_spec.h"

namespace hpctrain::ckpt {

struct H5LayoutInput {
  std::vector<TensorSpec> datasets;  // names are dataset paths, "model/fc.weight"
  std::vector<std::pair<std::string, std::string>> root_attrs;  // string attributes on "/"
  // Compressed files: the tensors (contiguous CPU, one per spec), deflated by HDF5; else null.
  const std::vector<std::pair<std::string, at::Tensor>>* compress_data = nullptr;
  std::function<void()> after_first_dataset;  // fault injection for crash tests; may be empty
};

struct H5Layout {
  size_t size = 0;               // the whole file
  std::vector<int64_t> offsets;  // per dataset: where its bytes go; -1: inside `meta`, or empty
  struct Segment {
    size_t file_off, len, meta_off;
  };
  std::vector<Segment> segments;  // HDF5's bytes in file order, from `meta`
  std::vector<unsigned char> meta;
};

H5Layout build_h5_layout(const std::string& path, const H5LayoutInput& in);

}  // namespace hpctrain::ckpt
