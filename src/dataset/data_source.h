// DataSource: one split of a data set, from one file (DIR/train.h5) or several numbered files
// (DIR/train-00000.h5, DIR/train-00001.h5, ...) that are one data set in file order: global
// sample i lives in the first file whose cumulative size exceeds i. The sampler sees the global
// index space, so samples are spread over ranks globally (not one file per rank).
//
// Contract of open(): every file is validated up front (h5_dataset.h) and they must agree:
// input dtype, per-sample shape, target kind and shape; class labels must lie in [0, K) where K
// is the largest class count any file declares or needs. A gap in the numbering (train-00000 and
// train-00002 without train-00001) or both train.h5 and train-*.h5 is an error naming the files.
// Reads stay on demand: a batch reads from each file it touches once.
//
// Token data: when the first file holds a `tokens` dataset the split is a token stream
// (dataset/token_source.h) and needs seq_len; samples are windows, read with read_tokens().
// seq_len with image files is an error naming the file.
//
// nanoGPT's layout (dataset/nanogpt_bin.h): a directory with train.bin has no .h5 splits;
// split_files gives DIR/train.bin and, for "test", DIR/val.bin (both .h5 and .bin splits in one
// directory is an error naming both). Those files are token streams of opts.vocab_size ids.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dataset/dataset_info.h"

namespace hpctrain {

class H5Dataset;
class TokenSource;

// DIR/<split>.h5, or the numbered DIR/<split>-NNNNN.h5 files in order, or nanoGPT's
// DIR/train.bin / DIR/val.bin. Throws hpctrain::Error.
std::vector<std::string> split_files(const std::string& dir, const std::string& split);

struct DataSourceOptions {
  std::string inputs = "images";
  std::string targets = "labels";  // integer labels; with regression, the float target dataset
  bool regression = false;
  int64_t in_memory_max = int64_t{512} << 20;  // bytes; see H5Dataset::open
  int64_t seq_len = 0;                         // token data: tokens per window (--seq-len)
  bool lazy_tokens = false;                    // token data: check ids per batch only (token_source.h)
  int64_t vocab_size = 0;                      // nanoGPT .bin data: its vocabulary (nanogpt_bin.h)
};

class DataSource {
 public:
  DataSource(const std::vector<std::string>& files, const DataSourceOptions& opts);
  ~DataSource();
  DataSource(DataSource&&) noexcept;

  const DatasetInfo& info() const { return info_; }
  // Class label of global sample i (classification).
  int64_t label(int64_t i) const;
  // Inputs (and float targets) of the global samples `sorted` (ascending, repeats allowed), as
  // float in that order; see H5Dataset::read.
  void read(const std::vector<int64_t>& sorted, float* out) const;
  void read_targets(const std::vector<int64_t>& sorted, float* out) const;
  // Token data: the windows `sorted` as int64 inputs and targets [n, seq_len] (token_source.h).
  void read_tokens(const std::vector<int64_t>& sorted, int64_t* inputs, int64_t* targets) const;

 private:
  template <class Fn>
  void per_file(const std::vector<int64_t>& sorted, int64_t row, float* out, Fn&& fn) const;
  std::vector<std::unique_ptr<H5Dataset>> files_;
  std::vector<int64_t> start_;  // global index of each file's first sample
  std::unique_ptr<TokenSource> tokens_;
  DatasetInfo info_;
};

}  // namespace hpctrain
