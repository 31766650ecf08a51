// Writes image-classification HDF5 files in hpctrain's layout (contract, see DESIGN.md):
//   images  uint8 [N, C, H, W]      labels  int64 [N]
//   file attributes: source (string), class_names (strings), num_classes (int64),
//                    mean, std (float32 [C], per channel, pixel/255 units, TRAINING set's)
// h5py reads these files. Output appears atomically: each file is written under a temporary
// name in the same directory and renamed only after every file of the pair is complete, so an
// error leaves no half-written train.h5/test.h5 behind.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hpctrain {

struct ImageSet {
  std::vector<int64_t> sample_shape;  // C, H, W
  std::vector<uint8_t> images;        // N * C * H * W, sample-major
  std::vector<int64_t> labels;        // N
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

struct DatasetAttrs {
  std::string source;
  std::vector<std::string> class_names;  // its size is num_classes
  std::vector<float> mean, std;          // per channel, of the training set
};

// Per-channel mean and (population) standard deviation of pixel/255 over all samples.
void channel_mean_std(const ImageSet& s, std::vector<float>* mean, std::vector<float>* std);

// Writes `path` directly (no rename): the building block of write_train_test.
void write_image_h5(const std::string& path, const ImageSet& s, const DatasetAttrs& attrs);

// Creates `dir` if needed and has `write(path, is_train)` write dir/train.h5 and dir/test.h5
// under temporary names, renaming both only when both are complete (an error removes them).
void write_split_pair(const std::string& dir, const std::function<void(const std::string& path, bool is_train)>& write);

// Creates `dir` if needed and writes dir/train.h5 and dir/test.h5 atomically (see above).
// attrs.mean/std are filled from `train` when empty.
void write_train_test(const std::string& dir, const ImageSet& train, const ImageSet& test, DatasetAttrs attrs);

}  // namespace hpctrain
