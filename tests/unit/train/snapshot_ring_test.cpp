// snapshot_ring_partners (train/snapshot_copy.h): hosts ordered by their lowest rank, each rank
// sends to the same local rank on the next host (modulo that host's ranks); one host: none.
#include <gtest/gtest.h>

#include "train/snapshot_copy.h"

using namespace hpctrain;

TEST(SnapshotRing, OneHostSendsNoCopy) {
  EXPECT_EQ(snapshot_ring_partners({"a", "a", "a"}), (std::vector<int>{-1, -1, -1}));
  EXPECT_EQ(snapshot_ring_partners({"a"}), (std::vector<int>{-1}));
}

TEST(SnapshotRing, TwoHostsSendToEachOther) {
  EXPECT_EQ(snapshot_ring_partners({"node0", "node1"}), (std::vector<int>{1, 0}));
  // Ranks interleaved across hosts: host a = {0, 2}, host b = {1, 3}.
  EXPECT_EQ(snapshot_ring_partners({"a", "b", "a", "b"}), (std::vector<int>{1, 0, 3, 2}));
}

TEST(SnapshotRing, UnevenHostsWrapTheLocalRank) {
  // a = {0, 1, 2}, b = {3}, c = {4, 5}: a -> b (all to 3), b -> c (4), c -> a (0, 1).
  EXPECT_EQ(snapshot_ring_partners({"a", "a", "a", "b", "c", "c"}), (std::vector<int>{3, 3, 3, 4, 0, 1}));
  EXPECT_EQ(snapshot_copy_dir_name(7), "copy-of-rank-00007");
}
