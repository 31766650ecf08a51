// DatasetInfo: what a data file holds, as validated at open (dataset/h5_dataset.h). No HDF5 or
// LibTorch here, so it can appear in public headers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain {

struct DatasetInfo {
  int64_t size = 0;                   // N
  std::vector<int64_t> sample_shape;  // C,H,W (or the file's per-sample dims, with C=1 added)
  int64_t num_classes = 0;            // attribute num_classes, else class_names' size, else max+1
  std::vector<float> mean, std;       // per channel; attributes mean/std, else 0 and 1
  bool has_stats = false;             // mean/std came from the file
  bool uint8_pixels = true;           // false: float32 pixels
  std::string path;
  int64_t sample_numel() const;
};

}  // namespace hpctrain
