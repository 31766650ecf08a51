// Per-sample transforms on raw float pixels [C,H,W]: augmentation and normalization.
// No LibTorch; the loader applies them while assembling a batch.
#pragma once

#include <cstdint>
#include <vector>

namespace hpctrain {

// A seed for one sample's augmentation: a SplitMix64 mix of (seed, epoch, sample index), so the
// draw depends on nothing else (not the rank, batch position, world size or prefetch depth).
uint64_t sample_seed(uint64_t seed, int64_t epoch, int64_t index);

// Random crop with zero padding `pad` (shift by -pad..pad in each direction, the uncovered border
// becomes 0 = black before normalization) and a horizontal flip with probability 1/2, in place.
void augment_sample(float* x, int64_t c, int64_t h, int64_t w, int64_t pad, uint64_t sample_seed);

// x = (x * scale - mean[ch]) / std[ch] over each channel plane (scale = 1/255 for uint8 files).
void normalize_sample(float* x, int64_t c, int64_t plane, float scale, const std::vector<float>& mean,
                      const std::vector<float>& std);

}  // namespace hpctrain
