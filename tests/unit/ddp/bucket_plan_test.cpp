#include <gtest/gtest.h>

#include "ddp/bucket_plan.h"

using namespace hpctrain;

namespace {
std::vector<ParamSpec> specs(std::vector<int64_t> numels, std::string dtype = "float32") {
  std::vector<ParamSpec> v;
  for (size_t i = 0; i < numels.size(); ++i) v.push_back({"p" + std::to_string(i), numels[i], 4, dtype, "cpu"});
  return v;
}
constexpr int64_t MiB = 1 << 20;
}  // namespace

TEST(BucketPlan, ReverseOrderAndFirstBucketCap) {
  // 4 params of 0.5 MiB each; first bucket <= 1 MiB, then 25 MiB.
  auto plan = make_bucket_plan(specs({MiB / 8, MiB / 8, MiB / 8, MiB / 8}), 25 * MiB);
  ASSERT_EQ(plan.buckets.size(), 2u);
  EXPECT_EQ(plan.buckets[0].params, (std::vector<size_t>{3, 2}));
  EXPECT_EQ(plan.buckets[1].params, (std::vector<size_t>{1, 0}));
  EXPECT_EQ(plan.buckets[0].offsets, (std::vector<int64_t>{0, MiB / 8}));
  EXPECT_EQ(plan.bucket_of[0], 1u);
  EXPECT_EQ(plan.slot_of[0], 1u);
  EXPECT_EQ(plan.buckets[1].bytes, MiB);
}

TEST(BucketPlan, OversizedParamGetsItsOwnBucket) {
  auto plan = make_bucket_plan(specs({10, 10 * MiB, 10}), 1 * MiB, 1 * MiB);
  ASSERT_EQ(plan.buckets.size(), 3u);
  EXPECT_EQ(plan.buckets[1].params, (std::vector<size_t>{1}));
}

TEST(BucketPlan, NeverMixesDtypesOrDevices) {
  auto v = specs({10, 10, 10, 10});
  v[1].dtype = "float16";
  v[1].element_size = 2;
  v[2].device = "cuda:0";
  auto plan = make_bucket_plan(v, 25 * MiB);
  ASSERT_EQ(plan.buckets.size(), 4u);
  for (auto& b : plan.buckets) EXPECT_EQ(b.params.size(), 1u);
}

TEST(BucketPlan, TinyCapGivesOneBucketPerParamAndHugeCapOne) {
  auto tiny = make_bucket_plan(specs({100, 100, 100}), 1);
  EXPECT_EQ(tiny.buckets.size(), 3u);
  auto huge = make_bucket_plan(specs({100, 100, 100}), 10000 * MiB, 10000 * MiB);
  EXPECT_EQ(huge.buckets.size(), 1u);
  EXPECT_EQ(huge.buckets[0].numel, 300);
}

TEST(BucketPlan, EveryParamHasExactlyOneSlot) {
  auto plan = make_bucket_plan(specs({7, 300000, 5, 1, 90000, 2}), MiB / 2, MiB / 4);
  std::vector<int> seen(6, 0);
  for (auto& b : plan.buckets)
    for (auto p : b.params) ++seen[p];
  for (int s : seen) EXPECT_EQ(s, 1);
  EXPECT_NE(plan.describe().find("bucket(s)"), std::string::npos);
}
