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

namespace {

// What pick_shards (train/snapshot_pick_shards.cpp) assembles from the shard-only snapshots of a
// --zero 3 run of `world` ranks: rank 0's snapshot whole (replicated tensors, its blocks and
// shard, the records), every other rank's own tensors (is_rank_shard_tensor) alone.
CheckpointState zero3_snapshots(const Fixture& f, int world) {
  const CheckpointState canon = f.canonical(), sharded = f.sharded(world);
  const ZeroPartition z = make_zero_partition(f.plan, f.specs, world);
  const auto values = by_name(canon);
  CheckpointState out;
  for (int r = 0; r < world; ++r) {
    CheckpointState st;
    st.tensors.emplace_back("model/frozen.weight", at::ones({2, 2}));  // replicated: stays whole
    for (auto& [n, t] : canon.tensors)
      if (n.rfind("model/", 0) == 0) st.tensors.emplace_back(n, at::empty(t.sizes()));  // values never read
    std::vector<at::Tensor> blocks;  // rank r's block of every bucket, as FsdpEngine::param_blocks()
    for (const ZeroBucket& bk : z.buckets) {
      at::Tensor flat = at::zeros({bk.padded});
      for (const ZeroSlot& sl : bk.params)
        flat.narrow(0, sl.offset, sl.numel).copy_(values.at("model/" + sl.name).reshape({-1}));
      blocks.push_back(flat.narrow(0, r * bk.block, bk.block).clone());
    }
    capture_parameter_blocks(st, z, r, blocks);
    for (auto& e : sharded.tensors)
      if (is_rank_shard_tensor(e.first, r) || (r == 0 && e.first == kZeroStepTensor)) st.tensors.push_back(e);
    st.meta["zero"] = sharded.meta["zero"];
    for (auto& e : st.tensors) EXPECT_FALSE(e.first.rfind("model/fc", 0) == 0) << e.first << " left in the snapshot";
    if (r == 0) {
      out = st;
      continue;
    }
    for (auto& e : st.tensors)
      if (is_rank_shard_tensor(e.first, r)) out.tensors.push_back(e);
  }
  return out;
}

}  // namespace

TEST(ZeroState, Zero3ParameterBlocksOfAnyWorldSizeJoinIntoThePerParameterState) {
  Fixture f;
  auto want = by_name(f.canonical());
  want["model/frozen.weight"] = at::ones({2, 2});
  for (int world : {1, 2, 3, 4, 5}) {
    CheckpointState st = zero3_snapshots(f, world);
    ASSERT_TRUE(has_sharded_parameters(st));
    unshard_parameters(st, "test");
    EXPECT_FALSE(has_sharded_parameters(st));
    EXPECT_TRUE(has_sharded_optimizer_state(st));  // the optimizer's shards stay for its own unsharder
    unshard_optimizer_state(st, "test");
    auto got = by_name(st);
    ASSERT_EQ(got.size(), want.size()) << world;
    for (auto& [name, t] : want) {
      ASSERT_TRUE(got.count(name)) << name << " world " << world;
      EXPECT_EQ(got[name].sizes(), t.sizes()) << name;
      EXPECT_TRUE(at::equal(got[name], t)) << name << " world " << world;
    }
  }
}

TEST(ZeroState, Zero3ParameterBlocksThatDisagreeWithTheRecordAreAnError) {
  Fixture f;
  auto expect_error = [](CheckpointState st, const std::string& part) {
    try {
      unshard_parameters(st, "snapshot step 22");
      ADD_FAILURE() << "no error (" << part << ")";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("snapshot step 22"), std::string::npos) << m;
      EXPECT_NE(m.find(part), std::string::npos) << m;
    }
  };
  {  // rank 2's block of unit 1 missing (its snapshot lost)
    CheckpointState st = zero3_snapshots(f, 3);
    std::vector<std::pair<std::string, at::Tensor>> kept;
    for (auto& e : st.tensors)
      if (e.first != zero_param_block_name(2, 1)) kept.push_back(e);
    st.tensors = kept;
    expect_error(st, "no " + zero_param_block_name(2, 1));
  }
  {  // a block cut short
    CheckpointState st = zero3_snapshots(f, 2);
    for (auto& e : st.tensors)
      if (e.first == zero_param_block_name(1, 0)) e.second = e.second.narrow(0, 0, e.second.numel() - 1);
    expect_error(st, zero_param_block_name(1, 0) + " has");
  }
  {  // a shape missing
    CheckpointState st = zero3_snapshots(f, 2);
    st.meta["param_shapes"].erase("fc2.bias");
    expect_error(st, "no shape for parameter fc2.bias");
  }
  {  // a block of a rank beyond the record
    CheckpointState st = zero3_snapshots(f, 2);
    st.tensors.emplace_back(zero_param_block_name(2, 0), at::zeros({1}));
    expect_error(st, "beyond the record");
  }
}
