// Per-sample augmentation and normalization. The crop and flip come from std::mt19937_64 with
// plain modulo draws (not std::uniform_int_distribution), so they match across standard
// libraries.
#include "dataset/transform.h"

#include <random>

namespace hpctrain {

uint64_t sample_seed(uint64_t seed, int64_t epoch, int64_t index) {
  auto mix = [](uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  return mix(mix(mix(seed) ^ uint64_t(epoch)) ^ uint64_t(index));
}

void augment_sample(float* x, int64_t c, int64_t h, int64_t w, int64_t pad, uint64_t seed) {
  std::mt19937_64 rng(seed);
  // Plain modulo draws: fixed across standard libraries (the bias for tiny ranges is ~1e-18).
  const int64_t dy = pad ? int64_t(rng() % uint64_t(2 * pad + 1)) - pad : 0;
  const int64_t dx = pad ? int64_t(rng() % uint64_t(2 * pad + 1)) - pad : 0;
  const bool flip = rng() & 1;
  std::vector<float> src(x, x + c * h * w);
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t xx = 0; xx < w; ++xx) {
        // Output pixel (y, xx) of the crop window shifted by (dy, dx) over the padded image.
        const int64_t sy = y + dy, sx0 = flip ? w - 1 - xx : xx, sx = sx0 + dx;
        const bool inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
        x[(ch * h + y) * w + xx] = inside ? src[(ch * h + sy) * w + sx] : 0.f;
      }
}

void normalize_sample(float* x, int64_t c, int64_t plane, float scale, const std::vector<float>& mean,
                      const std::vector<float>& std) {
  for (int64_t ch = 0; ch < c; ++ch) {
    const float m = mean[ch], inv = 1.f / std[ch];
    float* p = x + ch * plane;
    for (int64_t k = 0; k < plane; ++k) p[k] = (p[k] * scale - m) * inv;
  }
}

}  // namespace hpctrain
