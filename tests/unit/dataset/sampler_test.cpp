// DistributedSampler: PyTorch semantics, determinism, reshuffling, positions across world sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "dataset/sampler.h"
#include "runtime/check.h"

using hpctrain::DistributedSampler;
using hpctrain::SamplerPosition;

namespace {

// All ranks' shares for one epoch.
std::vector<DistributedSampler> world_of(int64_t n, int w, bool shuffle, bool drop_last, uint64_t seed = 7) {
  std::vector<DistributedSampler> v;
  for (int r = 0; r < w; ++r) v.emplace_back(n, w, r, shuffle, seed, drop_last);
  return v;
}

}  // namespace

TEST(Sampler, SharesAreEqualDisjointAndCoverForManyWorldsAndSizes) {
  for (int w = 1; w <= 7; ++w)
    for (int64_t n : {int64_t(w) - 1, int64_t(w), int64_t(w) + 1, 2 * int64_t(w) - 1, 3 * int64_t(w),
                      3 * int64_t(w) + 2, int64_t(50)}) {
      if (n <= 0) continue;
      for (bool drop : {false, true}) {
        auto ranks = world_of(n, w, true, drop);
        const int64_t expect = drop ? n / w : (n + w - 1) / w;  // PyTorch's num_samples
        std::multiset<int64_t> valid_seen;
        int64_t invalid = 0;
        for (auto& s : ranks) {
          ASSERT_EQ(s.num_samples(), expect) << "w=" << w << " n=" << n << " drop=" << drop;
          ASSERT_EQ(s.num_batches(4), (expect + 3) / 4);
          for (int64_t i = 0; i < s.num_samples(); ++i)
            s.valid()[i] ? (void)valid_seen.insert(s.indices()[i]) : (void)++invalid;
        }
        // Valid entries are disjoint (no duplicates) and cover all but the trimmed samples.
        std::set<int64_t> uniq(valid_seen.begin(), valid_seen.end());
        EXPECT_EQ(uniq.size(), valid_seen.size()) << "w=" << w << " n=" << n;
        EXPECT_EQ(int64_t(uniq.size()), drop ? n / w * w : n) << "w=" << w << " n=" << n;
        EXPECT_EQ(invalid, drop ? 0 : expect * w - n);
      }
    }
}

TEST(Sampler, MatchesPyTorchStridingAndPaddingWithoutShuffle) {
  // Expected values printed by torch 2.15's own DistributedSampler (shuffle=False):
  //   [list(DistributedSampler(range(5), 3, r, shuffle=False)) for r in range(3)]
  //   -> [[0, 3], [1, 4], [2, 0]];  range(2) on 5 ranks -> [[0], [1], [0], [1], [0]];
  //   range(5), 3 ranks, drop_last=True -> [[0], [1], [2]].
  auto ranks = world_of(5, 3, false, false);
  EXPECT_EQ(ranks[0].indices(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(ranks[1].indices(), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(ranks[2].indices(), (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(ranks[2].valid(), (std::vector<bool>{true, false}));
  // Padding longer than the list repeats it cyclically: n=2, w=5 -> [0,1,0,1,0].
  auto small = world_of(2, 5, false, false);
  std::vector<int64_t> got;
  for (auto& s : small) got.push_back(s.indices()[0]);
  EXPECT_EQ(got, (std::vector<int64_t>{0, 1, 0, 1, 0}));
  // drop_last trims: n=5, w=3 -> [0,1,2].
  auto trimmed = world_of(5, 3, false, true);
  EXPECT_EQ(trimmed[1].indices(), (std::vector<int64_t>{1}));
}

TEST(Sampler, PermutationIsDeterministicPerSeedAndReshuffledPerEpoch) {
  auto p = hpctrain::epoch_permutation(1000, 42, 3);
  EXPECT_EQ(p, hpctrain::epoch_permutation(1000, 42, 3));
  EXPECT_NE(p, hpctrain::epoch_permutation(1000, 43, 3));
  EXPECT_NE(p, hpctrain::epoch_permutation(1000, 42, 4));
  std::vector<int64_t> sorted(p);
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  // Pinned values: the order must not change across platforms or releases (checkpoints rely on
  // it). Derived independently by a pure-Python mt19937_64 (the std:: recurrence and tempering)
  // seeded 42+3, with i from n-1 down to 1 swapping p[i] and p[r % (i+1)], rejecting
  // r >= 2^64-1 - (2^64-1) % (i+1).
  const std::vector<int64_t> first = {4, 7, 2, 8, 0, 5, 6, 3, 9, 1};
  EXPECT_EQ(hpctrain::epoch_permutation(10, 42, 3), first);
  DistributedSampler s(10, 1, 0, true, 42, false);
  s.set_epoch(3);
  EXPECT_EQ(s.indices(), first);
  s.set_epoch(4);
  EXPECT_NE(s.indices(), first);
}

TEST(Sampler, PositionResumesInSameWorld) {
  DistributedSampler s(103, 4, 1, true, 5, false);
  s.set_epoch(2);
  const int64_t B = 3;
  auto pos = s.position_after(5, B);
  EXPECT_EQ(pos, (SamplerPosition{2, 5 * B * 4}));
  DistributedSampler r(103, 4, 1, true, 5, false);
  r.set_position(pos);
  // The resumed share is exactly the tail of the original share.
  std::vector<int64_t> tail(s.indices().begin() + 5 * B, s.indices().end());
  EXPECT_EQ(r.indices(), tail);
  EXPECT_EQ(s.position_after(s.num_batches(B), B), (SamplerPosition{3, 0}));
}

TEST(Sampler, PositionSurvivesWorldSizeChange) {
  // 4 ranks consume 3 batches of 5, then the job resumes on 3 ranks with batch 7: every sample
  // of the epoch is seen exactly once in total (padding excluded).
  const int64_t n = 101;
  for (bool drop : {false}) {
    auto before = world_of(n, 4, true, drop, 11);
    std::multiset<int64_t> seen;
    for (auto& s : before)
      for (int64_t b = 0; b < 3; ++b) {
        std::vector<bool> v;
        auto idx = s.batch(b, 5, &v);
        for (size_t i = 0; i < idx.size(); ++i)
          if (v[i]) seen.insert(idx[i]);
      }
    SamplerPosition pos = before[0].position_after(3, 5);
    for (auto& s : before) EXPECT_EQ(s.position_after(3, 5), pos);  // every rank agrees
    EXPECT_EQ(pos.samples_consumed, 60);
    auto after = world_of(n, 3, true, drop, 11);
    int64_t count = -1;
    for (auto& s : after) {
      s.set_position(pos);
      if (count < 0) count = s.num_samples();
      EXPECT_EQ(s.num_samples(), count);  // equal shares after the change too
      for (int64_t i = 0; i < s.num_samples(); ++i)
        if (s.valid()[i]) seen.insert(s.indices()[i]);
    }
    EXPECT_EQ(int64_t(seen.size()), n);
    EXPECT_EQ(int64_t(std::set<int64_t>(seen.begin(), seen.end()).size()), n);
  }
}

TEST(Sampler, RejectsBadRank) {
  EXPECT_THROW(DistributedSampler(10, 2, 2, true, 0, false), hpctrain::Error);
  DistributedSampler s(10, 2, 0, true, 0, false);
  EXPECT_THROW(s.num_batches(0), hpctrain::Error);
}
