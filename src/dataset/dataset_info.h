// DatasetInfo: what a data file holds, as validated at open (dataset/h5_dataset.h). No HDF5 or
// LibTorch here, so it can appear in public headers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain {

struct DatasetInfo {
  int64_t size = 0;  // N (all files of a multi-file data set together)
  // Per-sample input shape as stored ([N, d1..dk] -> [d1..dk]); a uint8 [N,H,W] image file is
  // seen as [N,1,H,W].
  std::vector<int64_t> sample_shape;
  std::string input_dtype = "uint8";  // uint8 (scaled by 1/255) | float16 | float32 (as stored)
  // Classification: integer labels [N] in [0, num_classes). Regression: float targets
  // [N, t1..tm] (target_shape = [t1..tm], num_classes = 0).
  bool classification = true;
  int64_t num_classes = 0;  // attribute num_classes, else class_names' size, else max+1
  std::vector<int64_t> target_shape;
  std::vector<float> mean, std;  // per entry of the first sample dim (or one value); else 0 and 1
  bool has_stats = false;        // mean/std came from the file
  bool uint8_pixels = true;      // input_dtype == "uint8"
  std::string path;              // the (first) file
  // Token data (dataset/token_source.h): a sample is a window of seq_len + 1 tokens; inputs and
  // targets are int64 [seq_len] (sample_shape = target_shape = [seq_len]), classification with
  // num_classes = vocab_size, input_dtype the stored integer type.
  bool tokens = false;
  int64_t vocab_size = 0;
  int64_t seq_len = 0;
  int64_t token_count = 0;  // tokens in all files together
  std::string tokenizer;    // the files' `tokenizer` attribute ("bytes", ...), "" when absent
  std::string tokenizer_model;  // the first file's serialized tokenizer model ("" when none)
  int64_t text_bytes = 0;       // the files' text_bytes attributes summed (0 when any lacks one)
  int64_t target_numel() const;
  int64_t sample_numel() const;
};

}  // namespace hpctrain
