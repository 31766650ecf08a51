// Sharded optimizer state <-> per-parameter state, for any pair of world sizes.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "ckpt/zero_state.h"
#include "runtime/check.h"

using namespace hpctrain;

namespace {

struct Fixture {
  std::vector<ParamSpec> specs = {{"fc1.weight", 12}, {"fc1.bias", 3}, {"fc2.weight", 9}, {"fc2.bias", 1}};
  std::vector<std::vector<int64_t>> shapes = {{3, 4}, {3}, {1, 9}, {1}};
  BucketPlan plan = make_bucket_plan(specs, 48, 40);  // two buckets
  CheckpointState canonical() const {
    CheckpointState st;
    at::manual_seed(5);
    for (size_t i = 0; i < specs.size(); ++i) {
      st.tensors.emplace_back("model/" + specs[i].name, at::randn(shapes[i]));
      st.tensors.emplace_back("optim/" + specs[i].name + ".exp_avg", at::randn(shapes[i]));
      st.tensors.emplace_back("optim/" + specs[i].name + ".exp_avg_sq", at::rand(shapes[i]));
      st.tensors.emplace_back("optim/" + specs[i].name + ".step", at::scalar_tensor(7, at::kLong));
    }
    return st;
  }
  // What a ZeRO run of `world` ranks saves for the same state.
  CheckpointState sharded(int world) const {
    CheckpointState flat = canonical(), st;
    ZeroPartition z = make_zero_partition(plan, specs, world);
    for (auto& e : flat.tensors)
      if (e.first.rfind("model/", 0) == 0) st.tensors.push_back(e);
    for (int r = 0; r < world; ++r)
      for (auto& [slot, t] : shard_optimizer_state(flat, z, r, "test"))
        st.tensors.emplace_back(zero_shard_name(r, slot), t);
    st.tensors.emplace_back(kZeroStepTensor, at::scalar_tensor(7, at::kLong));
    st.meta["zero"] = z.to_json();
    return st;
  }
};

std::map<std::string, at::Tensor> by_name(const CheckpointState& st) {
  std::map<std::string, at::Tensor> m;
  for (auto& [n, t] : st.tensors) m[n] = t;
  return m;
}

}  // namespace

TEST(ZeroState, UnshardingAnyWorldSizeGivesThePerParameterState) {
  Fixture f;
  auto want = by_name(f.canonical());
  for (int world : {1, 2, 3, 4, 5}) {
    CheckpointState st = f.sharded(world);
    EXPECT_TRUE(has_sharded_optimizer_state(st));
    unshard_optimizer_state(st, "test");
    EXPECT_FALSE(has_sharded_optimizer_state(st));
    EXPECT_EQ(st.meta["zero_saved_world_size"], world);
    auto got = by_name(st);
    ASSERT_EQ(got.size(), want.size()) << world;
    for (auto& [name, t] : want) {
      ASSERT_TRUE(got.count(name)) << name;
      EXPECT_TRUE(at::equal(got[name], t)) << name << " world " << world;
      EXPECT_EQ(got[name].sizes(), t.sizes()) << name;
    }
  }
}

TEST(ZeroState, ReshardingFourToThreeRanksKeepsEveryElement) {
  Fixture f;
  CheckpointState st = f.sharded(4);
  unshard_optimizer_state(st, "test");
  ZeroPartition z3 = make_zero_partition(f.plan, f.specs, 3);
  auto canon = by_name(f.canonical());
  for (const std::string slot : {"exp_avg", "exp_avg_sq"}) {
    // The expected shards, built from the contract (zero_partition.h): each bucket is its
    // parameters' values at their slot offsets, zero-padded to `padded`; rank r's shard is the
    // concatenation of block r of every bucket. Compared element by element.
    std::vector<at::Tensor> want(3);
    for (int r = 0; r < 3; ++r) {
      std::vector<at::Tensor> blocks;
      for (const ZeroBucket& bk : z3.buckets) {
        at::Tensor flat = at::zeros({bk.padded});
        for (const ZeroSlot& sl : bk.params)
          flat.narrow(0, sl.offset, sl.numel).copy_(canon.at("optim/" + sl.name + "." + slot).reshape({-1}));
        blocks.push_back(flat.narrow(0, r * bk.block, bk.block));
      }
      want[r] = at::cat(blocks);
    }
    int64_t total = 0;
    for (int r = 0; r < 3; ++r) {
      at::Tensor part = shard_optimizer_state(st, z3, r, "test").at(slot);
      total += part.numel();
      EXPECT_EQ(part.numel(), z3.shard_numel()) << slot << " rank " << r;
      EXPECT_TRUE(at::equal(part, want[r])) << slot << " rank " << r << ": " << part << " vs " << want[r];
    }
    EXPECT_EQ(total, 3 * z3.shard_numel());
  }
}

TEST(ZeroState, PartitionThatDisagreesWithItsShardsIsAnError) {
  Fixture f;
  {
    CheckpointState st = f.sharded(3);
    st.meta["zero"]["world_size"] = 2;  // record says 2, shards say 3 (sizes then disagree too)
    EXPECT_THROW(unshard_optimizer_state(st, "DIR/step-00000005"), Error);
  }
  {
    CheckpointState st = f.sharded(3);
    std::vector<std::pair<std::string, at::Tensor>> kept;
    for (auto& e : st.tensors)
      if (e.first != zero_shard_name(2, "exp_avg")) kept.push_back(e);
    st.tensors = kept;
    try {
      unshard_optimizer_state(st, "DIR/step-00000005");
      FAIL();
    } catch (const Error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("DIR/step-00000005"), std::string::npos) << m;
      EXPECT_NE(m.find("disagrees"), std::string::npos) << m;
      EXPECT_NE(m.find("exp_avg"), std::string::npos) << m;
    }
  }
  {
    CheckpointState st = f.sharded(2);
    for (auto& e : st.tensors)
      if (e.first == zero_shard_name(1, "exp_avg_sq")) e.second = e.second.narrow(0, 0, e.second.numel() - 1);
    EXPECT_THROW(unshard_optimizer_state(st, "x"), Error);
  }
}
