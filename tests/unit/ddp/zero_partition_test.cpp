#include <gtest/gtest.h>

#include "ddp/zero_partition.h"
#include "runtime/check.h"

using namespace hpctrain;

namespace {
std::vector<ParamSpec> specs(std::vector<int64_t> numels) {
  std::vector<ParamSpec> out;
  for (size_t i = 0; i < numels.size(); ++i) out.push_back({"p" + std::to_string(i), numels[i]});
  return out;
}
}  // namespace

TEST(ZeroPartition, PadsEveryBucketToAMultipleOfTheWorld) {
  auto ps = specs({10, 3, 7, 1});
  BucketPlan plan = make_bucket_plan(ps, 40, 40);  // two buckets: [p3 p2] [p1 p0]... by bytes
  for (int world : {1, 2, 3, 4, 7}) {
    ZeroPartition z = make_zero_partition(plan, ps, world);
    ASSERT_EQ(z.buckets.size(), plan.buckets.size());
    int64_t padded = 0;
    for (const auto& b : z.buckets) {
      EXPECT_EQ(b.padded % world, 0);
      EXPECT_GE(b.padded, b.numel);
      EXPECT_LT(b.padded - b.numel, world);
      EXPECT_EQ(b.block * world, b.padded);
      padded += b.padded;
    }
    EXPECT_EQ(z.shard_numel() * world, padded);
    EXPECT_EQ(z.param_numel(), 21);
    EXPECT_EQ(z.padding(), padded - 21);
    EXPECT_EQ(z.shard_offset(0), 0);
    if (z.buckets.size() > 1) EXPECT_EQ(z.shard_offset(1), z.buckets[0].block);
  }
}

TEST(ZeroPartition, RecordsSlotsInBucketOrder) {
  auto ps = specs({4, 5, 6});
  ZeroPartition z = make_zero_partition(make_bucket_plan(ps, 1 << 20, 1 << 20), ps, 4);
  ASSERT_EQ(z.buckets.size(), 1u);
  const auto& b = z.buckets[0];
  ASSERT_EQ(b.params.size(), 3u);
  EXPECT_EQ(b.params[0].name, "p2");  // reverse registration order, as DDP's plan
  EXPECT_EQ(b.params[0].offset, 0);
  EXPECT_EQ(b.params[1].offset, 6);
  EXPECT_EQ(b.params[2].offset, 11);
  EXPECT_EQ(b.numel, 15);
  EXPECT_EQ(b.padded, 16);
  EXPECT_EQ(b.block, 4);
}

TEST(ZeroPartition, JsonRoundTripAndValidation) {
  auto ps = specs({10, 3, 7});
  ZeroPartition z = make_zero_partition(make_bucket_plan(ps, 40, 40), ps, 3);
  ZeroPartition back = ZeroPartition::from_json(z.to_json(), "ckpt");
  EXPECT_EQ(back.to_json(), z.to_json());
  auto bad = z.to_json();
  bad["buckets"][0]["padded"] = bad["buckets"][0]["padded"].get<int64_t>() + 3;
  try {
    ZeroPartition::from_json(bad, "DIR/step-00000010");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("DIR/step-00000010"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("partition"), std::string::npos) << e.what();
  }
  auto missing = z.to_json();
  missing.erase("world_size");
  EXPECT_THROW(ZeroPartition::from_json(missing, "x"), Error);
  auto gap = z.to_json();
  gap["buckets"][0]["params"][0][2] = 1;  // slots no longer tile the bucket
  EXPECT_THROW(ZeroPartition::from_json(gap, "x"), Error);
}
