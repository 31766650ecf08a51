// DistributedSampler with PyTorch's semantics (torch.utils.data.distributed), plus a position
// that survives a change of world size. No LibTorch here.
//
// Contract (for dataset size N, world W, rank r):
// - The epoch's order is a permutation of 0..N-1 from (seed + epoch) when shuffling, else
//   0..N-1. It is computed by our own Fisher-Yates over std::mt19937_64, so it is identical on
//   every rank, every platform and every LibTorch version (at::randperm's stream may change).
// - drop_last=false: the list is padded to a multiple of W by repeating from its start;
//   drop_last=true: trimmed to a multiple of W. Rank r takes list[r::W]. Every rank gets the same
//   num_samples(), hence the same num_batches(B) = ceil(num_samples / B) (only the last batch
//   may be smaller, and it has the same size on every rank).
// - Padding duplicates are marked invalid (valid()==false) so evaluation counts every sample
//   exactly once.
// - Position and world-size change: batch b of every rank covers the global list positions
//   [b*B*W, (b+1)*B*W), so after b full batches the world has consumed exactly the first
//   G = b*B*W entries of the epoch's permutation, whatever W was. A Position stores G (global
//   samples consumed), not a batch index. Resuming at G in a world of W' takes the unconsumed
//   tail perm[G:N], pads or trims it to a multiple of W', and rank r' takes tail[r'::W']. No
//   sample is skipped or repeated (except marked padding) across the change. G >= N means the
//   epoch is done.
#pragma once

#include <cstdint>
#include <vector>

namespace hpctrain {

struct SamplerPosition {
  int64_t epoch = 0;
  int64_t samples_consumed = 0;  // global, over all ranks (see the contract above)
  bool operator==(const SamplerPosition&) const = default;
};

// The epoch's permutation of 0..n-1 (exposed for tests and tools).
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, int world, int rank, bool shuffle, uint64_t seed, bool drop_last);

  // Starts epoch `epoch` from its beginning (reshuffles).
  void set_epoch(int64_t epoch) { set_position({epoch, 0}); }
  // Starts from a position saved in any world size (see the contract).
  void set_position(const SamplerPosition& p);
  int64_t epoch() const { return pos_.epoch; }

  // This rank's share for the current epoch (from the current position).
  const std::vector<int64_t>& indices() const { return indices_; }
  // valid()[i] is false when indices()[i] is a padding duplicate.
  const std::vector<bool>& valid() const { return valid_; }
  int64_t num_samples() const { return static_cast<int64_t>(indices_.size()); }
  int64_t num_batches(int64_t batch_size) const;

  // Indices [b*B, min((b+1)*B, num_samples)) of this rank's share.
  std::vector<int64_t> batch(int64_t b, int64_t batch_size, std::vector<bool>* valid = nullptr) const;

  // Position after this rank (and so every rank) has consumed batches [0, b) of the current
  // share, counted from the position the share started at; {epoch+1, 0} once b reaches
  // num_batches(B).
  SamplerPosition position_after(int64_t b, int64_t batch_size) const;

  int world() const { return world_; }
  int rank() const { return rank_; }
  int64_t dataset_size() const { return n_; }

 private:
  int64_t n_;
  int world_, rank_;
  bool shuffle_, drop_last_;
  uint64_t seed_;
  SamplerPosition pos_;
  std::vector<int64_t> indices_;
  std::vector<bool> valid_;
};

}  // namespace hpctrain
