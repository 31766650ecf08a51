// Small synthetic image-classification data sets with learnable structure, for tests of every
// stage (`hpctrain data synthetic` is the CLI front end).
//
// Each class k has a fixed random mean image (pixels uniform in [32, 224)); a sample of class k
// is that mean plus Gaussian noise (std `noise`), rounded and clamped to uint8. Classes are thus
// separable by a linear model and a training test can assert that loss goes down. Labels cycle
// through the classes in a shuffled order, so every class appears (N >= classes).
// Everything derives from `seed` with std::mt19937_64 (stable across platforms and libraries).
#pragma once

#include <cstdint>
#include <string>

#include "dataset/prep/h5_writer.h"

namespace hpctrain {

struct SyntheticSpec {
  int64_t train_size = 512;
  int64_t test_size = 128;
  int64_t channels = 1, height = 8, width = 8;
  int64_t classes = 4;
  uint64_t seed = 0;
  double noise = 24.0;  // pixel units
};

// Generates `n` samples drawn from the spec's class patterns; `stream` separates train (0) and
// test (1) noise while both share the class means.
ImageSet make_synthetic(const SyntheticSpec& spec, int64_t n, uint64_t stream);

// Writes dir/train.h5 and dir/test.h5 (layout of h5_writer.h). Throws hpctrain::Error on bad
// sizes (non-positive, fewer samples than classes, classes > 2^31).
void write_synthetic(const std::string& dir, const SyntheticSpec& spec);

}  // namespace hpctrain
