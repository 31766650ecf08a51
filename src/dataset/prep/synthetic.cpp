// Synthetic data sets: class means from one std::mt19937_64 seeded by `seed`, labels and noise
// from a second one seeded by `seed` and `stream`, so train and test share the class means.
#include "dataset/prep/synthetic.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "runtime/check.h"

namespace hpctrain {

ImageSet make_synthetic(const SyntheticSpec& spec, int64_t n, uint64_t stream) {
  const int64_t d = spec.channels * spec.height * spec.width;
  std::mt19937_64 pattern_rng(spec.seed * 0x9E3779B97F4A7C15ull + 1);
  std::vector<float> means(spec.classes * d);
  for (auto& m : means) m = 32.0f + float(pattern_rng() % 192);
  std::mt19937_64 rng(spec.seed * 0x9E3779B97F4A7C15ull + 2 + stream);
  std::normal_distribution<double> noise(0.0, spec.noise);
  ImageSet s;
  s.sample_shape = {spec.channels, spec.height, spec.width};
  s.labels.resize(n);
  for (int64_t i = 0; i < n; ++i) s.labels[i] = i % spec.classes;
  std::shuffle(s.labels.begin(), s.labels.end(), rng);
  s.images.resize(n * d);
  for (int64_t i = 0; i < n; ++i) {
    const float* m = means.data() + s.labels[i] * d;
    for (int64_t k = 0; k < d; ++k) {
      double v = std::round(m[k] + noise(rng));
      s.images[i * d + k] = uint8_t(std::clamp(v, 0.0, 255.0));
    }
  }
  return s;
}

void write_synthetic(const std::string& dir, const SyntheticSpec& spec) {
  if (spec.channels <= 0 || spec.height <= 0 || spec.width <= 0 || spec.classes <= 0 ||
      spec.classes > (int64_t(1) << 31))
    throw Error("synthetic: channels, height, width and classes must be positive");
  if (spec.train_size < spec.classes || spec.test_size < 1)
    throw Error("synthetic: need --n >= classes (" + std::to_string(spec.classes) + ") and --test-n >= 1");
  DatasetAttrs attrs;
  attrs.source =
      "hpctrain synthetic (seed " + std::to_string(spec.seed) + ", noise " + std::to_string(spec.noise) + ")";
  for (int64_t k = 0; k < spec.classes; ++k) attrs.class_names.push_back("class" + std::to_string(k));
  write_train_test(dir, make_synthetic(spec, spec.train_size, 0), make_synthetic(spec, spec.test_size, 1), attrs);
}

}  // namespace hpctrain
