// Loader: identical batches with and without prefetch, normalization and augmentation values,
// validity mask, clean shutdown mid-epoch, resume across world sizes, bad options.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <memory>
#include <set>

#include "dataset/loader.h"
#include "dataset/prep/synthetic.h"
#include "dataset/transform.h"
#include "runtime/check.h"
#include "runtime/device.h"
#include "temp_dir.h"

using hpctrain::Loader;
using hpctrain::LoaderOptions;
using hpctrain::testing::TempDir;

namespace {

hpctrain::SyntheticSpec small_spec() {
  hpctrain::SyntheticSpec s;
  s.train_size = 53, s.test_size = 10, s.channels = 2, s.height = 6, s.width = 5, s.classes = 3;
  s.seed = 9;
  return s;
}

std::vector<hpctrain::Batch> drain(Loader& l) {
  std::vector<hpctrain::Batch> v;
  while (auto b = l.next()) v.push_back(std::move(*b));
  return v;
}

}  // namespace

TEST(Loader, SameBatchesWithAndWithoutPrefetch) {
  TempDir d;
  hpctrain::write_synthetic(d.path(), small_spec());
  std::vector<std::vector<hpctrain::Batch>> first;  // prefetch 0, without and with augmentation
  for (bool augment : {false, true}) {
    std::vector<std::vector<hpctrain::Batch>> runs;
    for (int k : {0, 1, 3}) {
      LoaderOptions o;
      o.batch_size = 4, o.prefetch = k, o.augment = augment, o.seed = 3;
      Loader l(d / "train.h5", 2, 1, o);
      l.start_epoch(2);
      runs.push_back(drain(l));
      EXPECT_EQ(int64_t(runs.back().size()), l.batches_per_epoch());
      EXPECT_GE(l.data_wait_seconds(), 0.0);
    }
    ASSERT_EQ(runs[0].size(), 7u);  // ceil(ceil(53/2)=27 / 4)
    for (size_t r = 1; r < runs.size(); ++r)
      for (size_t b = 0; b < runs[0].size(); ++b) {
        EXPECT_TRUE(at::equal(runs[0][b].images, runs[r][b].images)) << "batch " << b;
        EXPECT_TRUE(at::equal(runs[0][b].labels, runs[r][b].labels));
        EXPECT_TRUE(at::equal(runs[0][b].valid, runs[r][b].valid));
        EXPECT_EQ(runs[r][b].index, int64_t(b));
        EXPECT_EQ(runs[r][b].epoch, 2);
      }
    EXPECT_EQ(runs[0].back().images.size(0), 3);  // the last, smaller batch
    first.push_back(runs[0]);
  }
  // The loader applies the augmentation: same samples and labels, changed images.
  int changed = 0;
  for (size_t b = 0; b < first[0].size(); ++b) {
    EXPECT_TRUE(at::equal(first[0][b].labels, first[1][b].labels));
    changed += !at::equal(first[0][b].images, first[1][b].images);
  }
  EXPECT_GT(changed, 0) << "--augment changed no batch";
}

TEST(Loader, BatchValuesMatchSamplerAndNormalization) {
  TempDir d;
  auto spec = small_spec();
  hpctrain::write_synthetic(d.path(), spec);
  auto ref = hpctrain::make_synthetic(spec, spec.train_size, 0);
  LoaderOptions o;
  o.batch_size = 5, o.prefetch = 2, o.seed = 4, o.mean = {0.5f, 0.25f}, o.std = {2.f, 0.5f};
  Loader l(d / "train.h5", 3, 2, o);
  hpctrain::DistributedSampler s(53, 3, 2, true, 4, false);
  l.start_epoch(1);
  s.set_epoch(1);
  int64_t b = 0, invalid = 0;
  const int64_t numel = 60, plane = 30;
  while (auto batch = l.next()) {
    std::vector<bool> valid;
    auto idx = s.batch(b++, 5, &valid);
    ASSERT_EQ(batch->images.sizes(), (at::IntArrayRef{int64_t(idx.size()), 2, 6, 5}));
    auto img = batch->images.contiguous();
    for (size_t i = 0; i < idx.size(); ++i) {
      EXPECT_EQ(batch->labels[i].item<int64_t>(), ref.labels[idx[i]]);
      EXPECT_EQ(batch->valid[i].item<bool>(), bool(valid[i]));
      invalid += !valid[i];
      for (int64_t k = 0; k < numel; ++k) {
        const int ch = k / plane;
        const float want = (ref.images[idx[i] * numel + k] / 255.f - o.mean[ch]) / o.std[ch];
        ASSERT_NEAR(img.data_ptr<float>()[i * numel + k], want, 1e-5);
      }
    }
  }
  EXPECT_EQ(b, l.batches_per_epoch());
  EXPECT_EQ(invalid, 1);  // 53 = 3*18 - 1: rank 2 holds the one padding duplicate
}

TEST(Loader, AugmentationIsDeterministicPerSampleAndMatchesClosedForm) {
  // A 1x3x3 image 1..9 (distinct values: each flip/shift gives a distinct image). Every output
  // must be one flip/shift of the input, and over many seeds every flip/shift must occur: an
  // augmentation that returns the image unchanged (or never flips, or never shifts) fails.
  std::vector<float> base = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<float> flipped = {3, 2, 1, 6, 5, 4, 9, 8, 7};
  std::set<std::vector<float>> pad0;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    auto x = base;
    hpctrain::augment_sample(x.data(), 1, 3, 3, 0, seed);  // pad 0: only a possible flip
    EXPECT_TRUE(x == base || x == flipped) << "seed " << seed;
    pad0.insert(x);
  }
  EXPECT_EQ(pad0.size(), 2u) << "pad 0: expected both the image and its mirror over 64 seeds";
  // With pad 1 every output is a shift by (dy,dx) in [-1,1]^2 of the (maybe flipped) image.
  std::set<int> seen;  // flip * 9 + (dy + 1) * 3 + (dx + 1)
  for (uint64_t seed = 0; seed < 400; ++seed) {
    auto y = base;
    hpctrain::augment_sample(y.data(), 1, 3, 3, 1, seed);
    auto again = base;
    hpctrain::augment_sample(again.data(), 1, 3, 3, 1, seed);
    EXPECT_EQ(y, again);
    int matched = -1;
    for (int f = 0; f < 2; ++f)
      for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
          const auto& src = f ? flipped : base;
          std::vector<float> want(9);
          for (int r = 0; r < 3; ++r)
            for (int c = 0; c < 3; ++c) {
              int sr = r + dy, sc = c + dx;
              want[r * 3 + c] = (sr >= 0 && sr < 3 && sc >= 0 && sc < 3) ? src[sr * 3 + sc] : 0.f;
            }
          if (want == y) matched = f * 9 + (dy + 1) * 3 + (dx + 1);
        }
    EXPECT_GE(matched, 0) << "seed " << seed << ": not a flip/shift of the input";
    seen.insert(matched);
  }
  seen.erase(-1);
  // 18 outcomes, each with probability 1/18: all occur in 400 fixed seeds.
  EXPECT_EQ(seen.size(), 18u) << "not every flip/shift occurs over 400 seeds";
  EXPECT_EQ(hpctrain::sample_seed(1, 2, 3), hpctrain::sample_seed(1, 2, 3));
  EXPECT_NE(hpctrain::sample_seed(1, 2, 3), hpctrain::sample_seed(1, 3, 3));
  EXPECT_NE(hpctrain::sample_seed(1, 2, 3), hpctrain::sample_seed(1, 2, 4));
}

TEST(Loader, ShutdownMidEpochJoinsCleanly) {
  TempDir d;
  hpctrain::write_synthetic(d.path(), small_spec());
  LoaderOptions o;
  o.batch_size = 2, o.prefetch = 4;
  {
    Loader l(d / "train.h5", 1, 0, o);
    ASSERT_TRUE(l.next().has_value());
    // Restart mid-epoch (stops the producer), take one batch, then destroy while the queue is full.
    l.start_epoch(1, 5);
    auto b = l.next();
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->index, 5);
    EXPECT_EQ(l.position(), (hpctrain::SamplerPosition{1, 12}));
  }
  // Destruction during an exception unwinding also joins.
  EXPECT_THROW(
      {
        Loader l(d / "train.h5", 1, 0, o);
        l.next();
        throw std::runtime_error("trainer failed");
      },
      std::runtime_error);
}

TEST(Loader, ResumeAtPositionFromAnotherWorldSize) {
  TempDir d;
  hpctrain::write_synthetic(d.path(), small_spec());
  LoaderOptions o;
  o.batch_size = 3, o.prefetch = 1;
  // World 1 takes 4 batches (12 samples); then a world of 1 with batch 5 resumes.
  Loader a(d / "train.h5", 1, 0, o);
  std::set<std::vector<float>> seen;
  auto key = [](const at::Tensor& img, int64_t i) {
    auto t = img[i].contiguous();
    return std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
  };
  for (int i = 0; i < 4; ++i) {
    auto b = a.next();
    for (int64_t k = 0; k < b->images.size(0); ++k) seen.insert(key(b->images, k));
  }
  auto pos = a.position();
  EXPECT_EQ(pos, (hpctrain::SamplerPosition{0, 12}));
  o.batch_size = 5;
  Loader r(d / "train.h5", 1, 0, o);
  r.start_at(pos);
  EXPECT_EQ(r.batches_per_epoch(), 9);  // 41 remaining samples in batches of 5
  while (auto b = r.next())
    for (int64_t k = 0; k < b->images.size(0); ++k) seen.insert(key(b->images, k));
  EXPECT_EQ(seen.size(), 53u);  // every sample exactly once (noise makes images distinct)
  EXPECT_EQ(r.position(), (hpctrain::SamplerPosition{1, 0}));
}

TEST(Loader, BadOptionsAreReported) {
  TempDir d;
  hpctrain::write_synthetic(d.path(), small_spec());
  LoaderOptions o;
  o.mean = {0.f};
  EXPECT_THROW(Loader(d / "train.h5", 1, 0, o), hpctrain::Error);
  o = LoaderOptions{};
  o.batch_size = 0;
  EXPECT_THROW(Loader(d / "train.h5", 1, 0, o), hpctrain::Error);
}

TEST(LoaderCuda, BatchesMatchCpuBatches) {
  if (hpctrain::visible_cuda_devices() == 0) GTEST_SKIP() << "no CUDA device visible: pinned copy path not exercised";
  TempDir d;
  hpctrain::write_synthetic(d.path(), small_spec());
  LoaderOptions o;
  o.batch_size = 4, o.prefetch = 2, o.augment = true;
  Loader cpu(d / "train.h5", 1, 0, o);
  o.device = c10::Device(c10::kCUDA, 0);
  Loader gpu(d / "train.h5", 1, 0, o);
  int64_t n = 0;
  while (auto c = cpu.next()) {
    auto g = gpu.next();
    ASSERT_TRUE(g.has_value());
    EXPECT_TRUE(g->images.is_cuda());
    EXPECT_TRUE(at::equal(c->images, g->images.cpu()));
    EXPECT_TRUE(at::equal(c->labels, g->labels.cpu()));
    ++n;
  }
  EXPECT_EQ(n, cpu.batches_per_epoch());
}

TEST(Loader, ConcurrentLoadersOnOneFileGiveTheirSequentialBatches) {
  // Several producer threads read the same file at once (all HDF5 calls under h5::lock()).
  TempDir d;
  hpctrain::write_synthetic(d.path(), small_spec());
  LoaderOptions o;
  o.batch_size = 3, o.prefetch = 2, o.augment = true;
  std::vector<std::unique_ptr<Loader>> loaders;
  for (int r = 0; r < 4; ++r) loaders.push_back(std::make_unique<Loader>(d / "train.h5", 4, r, o));
  std::vector<std::vector<hpctrain::Batch>> got(4);
  for (bool more = true; more;) {  // interleave consumers while all producers run
    more = false;
    for (int r = 0; r < 4; ++r)
      if (auto b = loaders[r]->next()) got[r].push_back(std::move(*b)), more = true;
  }
  for (int r = 0; r < 4; ++r) {
    o.prefetch = 0;
    Loader alone(d / "train.h5", 4, r, o);
    auto want = drain(alone);
    ASSERT_EQ(want.size(), got[r].size());
    for (size_t b = 0; b < want.size(); ++b) EXPECT_TRUE(at::equal(want[b].images, got[r][b].images));
  }
}
