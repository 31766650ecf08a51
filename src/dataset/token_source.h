// TokenSource: one split of a token data set (language models), from DIR/<split>.h5 or the
// numbered DIR/<split>-NNNNN.h5 files (data_source.h finds them). No LibTorch here.
//
// File format (data/README.md): a 1-D integer dataset `tokens` (uint8, uint16, int32 or int64;
// any integer type is read), the file attribute `vocab_size` (integer), and optionally the string
// attribute `tokenizer` ("bytes" for UTF-8 bytes, vocab 256; "sentencepiece" with the model in the
// byte dataset `tokenizer_model`, read into DatasetInfo::tokenizer_model from the first file) and
// `text_bytes` (summed into DatasetInfo::text_bytes). One stream per file.
//
// Samples are windows: with seq_len T, file f is cut into (len_f - 1) / T non-overlapping windows
// of T + 1 tokens at stride T (window k = tokens[kT, kT + T]); input = w[0:T], target = w[1:T+1].
// Windows never cross a file boundary. The windows of all files form one index space in file
// order (file 0's first), which the sampler shuffles.
//
// Contract of the constructor: every problem is found before training starts and reported as one
// hpctrain::Error line naming the file: missing `tokens` or `vocab_size`, a float or multi-dim
// `tokens`, vocab_size < 1 or > 2^31 - 1, files that disagree on vocab_size, seq_len < 1, an empty
// stream ("FILE: dataset 'tokens' is empty"), a stream too short for one window ("--seq-len 512
// is larger than FILE's stream of 300 tokens"), and a token id >= vocab_size or < 0 (naming the
// file, the position and the value). A stream that fits the process's in-memory budget
// (h5_dataset.h) is read whole at open, in chunks, and checked there; a larger one is streamed
// once at open in its stored integer type (a min/max pass in 4 Mi-token chunks; skipped when the
// type cannot hold an id >= vocab_size, e.g. uint8 with vocab_size 256) and afterwards read per
// batch with one coalesced H5Dread. With `lazy` the larger stream is not streamed at open: its
// ids are checked as batches read them, and a bad one throws hpctrain::InputError (exit code 2,
// runtime/check.h) from the reading thread, with the same text. Full checks make that error
// impossible unless the file changes under the run.
//
// nanoGPT's DIR/train.bin and DIR/val.bin (dataset/nanogpt_bin.h) are token streams too: raw
// uint16 ids, memory-mapped and read per batch (never cached), vocab_size = `bin_vocab`, the
// same windows; a .bin file with an odd byte count or an id >= vocab_size is an error as above.
//
// Thread use: as H5Dataset (one TokenSource per reading thread; H5* calls under h5::lock()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataset/dataset_info.h"

namespace hpctrain {

// Whether `path` is an HDF5 file with a `tokens` dataset (false when it cannot be opened: the
// image reader then names the problem).
bool is_token_file(const std::string& path);

class TokenSource {
 public:
  // `in_memory_max`: a stream of more bytes (4 per token in memory) is never read whole.
  // `lazy`: a stream that is not read whole is checked per batch only (see the contract above).
  // `bin_vocab`: the vocabulary of nanoGPT .bin files (dataset/nanogpt_bin.h; they carry none).
  TokenSource(const std::vector<std::string>& files, int64_t seq_len, int64_t in_memory_max, bool lazy = false,
              int64_t bin_vocab = 0);
  ~TokenSource();
  TokenSource(TokenSource&&) noexcept;

  const DatasetInfo& info() const { return info_; }
  // Windows `sorted` (ascending global window indices, repeats allowed): inputs and targets,
  // seq_len int64s per window each, in the order given.
  void read(const std::vector<int64_t>& sorted, int64_t* inputs, int64_t* targets) const;

 private:
  struct File;
  static void open_bin(File& f, int64_t vocab, bool lazy);
  std::vector<std::unique_ptr<File>> files_;
  std::vector<int64_t> start_;  // global index of each file's first window
  DatasetInfo info_;
};

}  // namespace hpctrain
