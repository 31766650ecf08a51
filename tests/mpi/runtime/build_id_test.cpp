// build_id / check_same_build on 1, 2 and 4 ranks of one build (the different-build case, which
// needs another binary on another host, is tests/cluster/test_cluster_misconfig.sh).
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "runtime/build_id.h"
#include "runtime/world.h"
#include "support/test_world.h"

namespace hpctrain {
namespace {

using testing::world;

TEST(BuildId, IsSixteenHexDigitsAndStable) {
  const std::string id = build_id();
  ASSERT_EQ(id.size(), 16u);
  for (char c : id) EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(c))) << id;
  EXPECT_EQ(build_id(), id);
}

TEST(BuildId, SameBuildOnEveryRankPasses) { EXPECT_NO_THROW(check_same_build(world())); }

}  // namespace
}  // namespace hpctrain
