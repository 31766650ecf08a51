// DistributedSampler. The permutation is our own Fisher-Yates with a rejection-sampled bounded
// draw, since std::uniform_int_distribution differs between standard libraries; a share is
// rebuilt from the position (global samples consumed), which is what allows a new world size.
#include "dataset/sampler.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <string>

#include "runtime/check.h"

namespace hpctrain {

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> p(n);
  std::iota(p.begin(), p.end(), 0);
  std::mt19937_64 rng(seed + static_cast<uint64_t>(epoch));
  // Fisher-Yates with our own bounded draw: std::uniform_int_distribution's algorithm is
  // implementation-defined, and the order must match across standard libraries.
  for (int64_t i = n - 1; i > 0; --i) {
    const uint64_t bound = uint64_t(i) + 1, limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t r;
    do r = rng();
    while (r >= limit);  // rejection keeps the draw unbiased
    std::swap(p[i], p[r % bound]);
  }
  return p;
}

DistributedSampler::DistributedSampler(int64_t dataset_size, int world, int rank, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : n_(dataset_size), world_(world), rank_(rank), shuffle_(shuffle), drop_last_(drop_last), seed_(seed) {
  if (world < 1 || rank < 0 || rank >= world)
    throw Error("sampler: rank " + std::to_string(rank) + " is outside world of size " + std::to_string(world));
  if (dataset_size < 0) throw Error("sampler: negative dataset size");
  set_epoch(0);
}

void DistributedSampler::set_position(const SamplerPosition& p) {
  if (p.samples_consumed < 0) throw Error("sampler: negative position");
  pos_ = p;
  indices_.clear();
  valid_.clear();
  const int64_t start = std::min(p.samples_consumed, n_);
  const int64_t remain = n_ - start;
  if (remain == 0) return;
  std::vector<int64_t> order;
  if (shuffle_) {
    order = epoch_permutation(n_, seed_, p.epoch);
  } else {
    order.resize(n_);
    std::iota(order.begin(), order.end(), 0);
  }
  const int64_t w = world_;
  // PyTorch: drop_last trims to floor(remain/W)*W; otherwise pads to ceil(remain/W)*W.
  const int64_t total = drop_last_ ? remain / w * w : (remain + w - 1) / w * w;
  for (int64_t g = rank_; g < total; g += w) {
    // Padding repeats the tail list from its start, cyclically (PyTorch's rule when the padding
    // is longer than the list).
    const int64_t t = g < remain ? g : (g - remain) % remain;
    indices_.push_back(order[start + t]);
    valid_.push_back(g < remain);
  }
}

int64_t DistributedSampler::num_batches(int64_t batch_size) const {
  if (batch_size <= 0) throw Error("sampler: batch size must be positive");
  return (num_samples() + batch_size - 1) / batch_size;
}

std::vector<int64_t> DistributedSampler::batch(int64_t b, int64_t batch_size, std::vector<bool>* valid) const {
  const int64_t lo = b * batch_size, hi = std::min(lo + batch_size, num_samples());
  if (b < 0 || lo >= hi) throw Error("sampler: batch " + std::to_string(b) + " is outside this epoch");
  if (valid) valid->assign(valid_.begin() + lo, valid_.begin() + hi);
  return {indices_.begin() + lo, indices_.begin() + hi};
}

SamplerPosition DistributedSampler::position_after(int64_t b, int64_t batch_size) const {
  // The whole share consumed (padding or trimming included) means the epoch is done.
  if (b >= num_batches(batch_size)) return {pos_.epoch + 1, 0};
  return {pos_.epoch, pos_.samples_consumed + b * batch_size * world_};
}

}  // namespace hpctrain
