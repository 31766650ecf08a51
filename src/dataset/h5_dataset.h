// Read side of one HDF5 data file: validation up front, then reads of chosen samples. An input
// dataset [N, d1..dk] (k >= 1; a uint8 [N,H,W] image file is seen as [N,1,H,W]) of uint8,
// float16 or float32, plus either integer labels [N] (classification) or float targets
// [N, t1..tm] (regression); the dataset names are configurable. No LibTorch here, so writers and
// tools link it cheaply.
//
// Contract of open(): every problem is found before training starts and reported as one
// hpctrain::Error line naming the file and the cause: file missing, not HDF5 (or truncated),
// dataset missing, unsupported rank or dtype, label count != image count, a label outside
// [0, num_classes), labels that are not integers (or targets that are not floats). Labels are
// read and checked once at open (N int64s: small); inputs and float targets are read on demand:
// at the first read, a dataset whose samples fit the process's in-memory budget (512 MiB in all,
// in its stored dtype, float16 as float32) is read whole, in one H5Dread, and every batch after
// that is a copy from memory (what PyTorch users do with a TensorDataset; it saves HDF5's
// per-batch selection and read, ~0.4 ms per 64-sample batch of Fashion-MNIST here); a larger one
// is read per batch with the coalesced read below.
//
// Thread use: one H5Dataset per reading thread (the loader opens one for its own thread); all
// HDF5 calls are made under h5::lock() (see h5_util.h for why).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dataset/dataset_info.h"
#include "io/h5_util.h"

namespace hpctrain {

// The process-wide in-memory budget (H5Dataset::kInMemoryBudget) every reader of whole datasets
// shares (H5Dataset's row caches, TokenSource's streams). reserve: false (and nothing reserved)
// when `bytes` more would pass it.
bool reserve_in_memory(int64_t bytes);
void release_in_memory(int64_t bytes);

class H5Dataset {
 public:
  // Opens and validates (see the contract above). num_classes > 0 overrides the file's value.
  // With regression, `labels` names the float target dataset instead.
  // `in_memory_max`: a dataset (inputs or targets) of more bytes is never read whole (0: read
  // every batch from the file); the process-wide budget applies on top.
  static constexpr int64_t kInMemoryBudget = int64_t{512} << 20;
  static H5Dataset open(const std::string& path, const std::string& images = "images",
                        const std::string& labels = "labels", int64_t num_classes = 0, bool regression = false,
                        int64_t in_memory_max = kInMemoryBudget);

  const DatasetInfo& info() const { return info_; }
  const std::vector<int64_t>& labels() const { return labels_; }

  // Reads the samples `sorted` (ascending; repeats allowed) as raw pixel values in float
  // (uint8 is NOT scaled here) into out[i * sample_numel ...] in the order given. The indices are
  // coalesced into runs of consecutive samples and fetched with ONE H5Dread over the union of
  // those hyperslabs, so a batch costs one read however it is scattered.
  void read(const std::vector<int64_t>& sorted, float* out) const;
  // The same for the float targets of a regression file (target_numel() floats per sample).
  void read_targets(const std::vector<int64_t>& sorted, float* out) const;

  // Number of H5Dread calls made by read() so far (tests check reads are coalesced, and that a
  // dataset held in memory was read once).
  int64_t read_calls() const { return read_calls_; }

 private:
  // A whole dataset in memory (see the contract above): raw uint8 or float32 rows.
  struct RowCache {
    bool tried = false;
    std::vector<uint8_t> u8;
    std::vector<float> f32;
    RowCache() = default;
    RowCache(RowCache&& o) noexcept;
    RowCache& operator=(RowCache&& o) noexcept;
    ~RowCache();  // gives its bytes back to the budget
    int64_t bytes() const { return int64_t(u8.size()) + 4 * int64_t(f32.size()); }
  };
  void fill_cache(RowCache& c, hid_t ds, bool u8, int64_t row_numel) const;

  DatasetInfo info_;
  std::vector<int64_t> labels_;
  h5::Handle file_, images_, targets_;
  int64_t in_memory_max_ = kInMemoryBudget;
  mutable int64_t read_calls_ = 0;
  mutable RowCache inputs_cache_, targets_cache_;
};

}  // namespace hpctrain
