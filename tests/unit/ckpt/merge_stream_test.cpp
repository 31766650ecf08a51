// ckpt merge streams one tensor at a time (ckpt/merge_plan.h, ckpt/merged_writer.h): its files
// hold the same tensors, dtypes and checksums as the in-memory merge it replaced (every tensor
// collected, ZeRO state unsharded by unshard_optimizer_state, tied names cloned, then written):
// a 3-rank ZeRO checkpoint over several shards, a parameter spanning ranks, a tied name, in
// every format, with and without --dtype and --full. Byte-identity with the previous build's
// files was checked once by hand (28 merges of trained checkpoints).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <map>

#include "ckpt/merge.h"
#include "ckpt/store.h"
#include "ckpt/verify.h"
#include "ckpt/zero_state.h"
#include "ddp/bucket_plan.h"
#include "support/ckpt_test_util.h"

using namespace hpctrain;
using namespace hpctrain::testing;

namespace {

// A ZeRO run of 3 ranks: fc1.weight (1.2 MB, so shards of 1 MB split the checkpoint) spans
// rank blocks; head.weight is tied to fc1.bias.
CheckpointState sharded_state() {
  std::vector<ParamSpec> specs = {{"fc1.weight", 300000}, {"fc1.bias", 3}, {"fc2.weight", 9}};
  std::vector<std::vector<int64_t>> shapes = {{600, 500}, {3}, {1, 9}};
  CheckpointState flat, st;
  at::manual_seed(3);
  for (size_t i = 0; i < specs.size(); ++i) {
    flat.tensors.emplace_back("model/" + specs[i].name, at::randn(shapes[i]));
    flat.tensors.emplace_back("optim/" + specs[i].name + ".exp_avg", at::randn(shapes[i]));
    flat.tensors.emplace_back("optim/" + specs[i].name + ".exp_avg_sq", at::rand(shapes[i]));
  }
  ZeroPartition z = make_zero_partition(make_bucket_plan(specs, 4 << 20), specs, 3);
  for (auto& e : flat.tensors)
    if (e.first.rfind("model/", 0) == 0) st.tensors.push_back(e);
  st.tensors.emplace_back("model/bn.num_batches_tracked", at::scalar_tensor(4, at::kLong));
  st.tensors.emplace_back("state/rng.cpu", values({8}, at::kByte, 1));
  for (int r = 0; r < 3; ++r)
    for (auto& [slot, t] : shard_optimizer_state(flat, z, r, "test")) st.tensors.emplace_back(zero_shard_name(r, slot), t);
  st.tensors.emplace_back(kZeroStepTensor, at::scalar_tensor(7, at::kLong));
  st.meta = {{"zero", z.to_json()}, {"tied", {{"head.weight", "fc1.bias"}}}, {"model", "test"}};
  return st;
}

// The in-memory merge, as merge.cpp did it before it streamed: names as the merged file reads
// them back (read_checkpoint: "model/..." in every format).
std::map<std::string, at::Tensor> in_memory_merge(const std::string& dir, const ckpt::MergeOptions& o) {
  CheckpointState st;
  ckpt::Manifest m = ckpt::verify_checkpoint(dir, [&](const ckpt::TensorEntry& e, at::Tensor t) {
    if (e.name.rfind("model/", 0) != 0 && !o.full) return;
    if (!o.dtype.empty() && at::isFloatingType(t.scalar_type())) t = t.to(o.dtype == "fp16" ? at::kHalf : at::kBFloat16);
    st.tensors.emplace_back(e.name, t);
  });
  st.meta = m.meta;
  if (o.full) unshard_optimizer_state(st, dir);
  std::map<std::string, at::Tensor> out;
  for (auto& [n, t] : st.tensors) out[n] = t;
  out["model/head.weight"] = out.at("model/fc1.bias").clone();
  return out;
}

}  // namespace

TEST(MergeStream, EveryFormatHoldsWhatTheInMemoryMergeHeld) {
  TempDir d;
  ckpt::write_checkpoint_sync({.dir = d.path, .shard_mb = 1}, 5, sharded_state(), 3);
  ASSERT_GT(ckpt::read_manifest(d.path + "/step-00000005").shards.size(), 1u);
  struct Case {
    std::string out;
    ckpt::MergeOptions o;
  };
  for (const Case& c : {Case{"a.h5", {.full = true}}, Case{"b.h5", {.full = true, .dtype = "bf16"}},
                        Case{"c.h5", {}}, Case{"d.pt", {}}, Case{"e.safetensors", {.dtype = "fp16"}},
                        Case{"f.pt", {.dtype = "bf16", .format = "torchscript"}}}) {
    SCOPED_TRACE(c.out);
    ckpt::MergeReport rep = ckpt::merge_checkpoint(d.path, d.path + "/" + c.out, c.o);
    auto want = in_memory_merge(d.path + "/step-00000005", c.o);
    CheckpointState got = read_checkpoint(d.path + "/" + c.out, c10::kCPU);  // checks every tensor_xxh3
    EXPECT_EQ(rep.tensors, want.size());
    ASSERT_EQ(got.tensors.size(), want.size());
    for (auto& [name, t] : got.tensors) {
      ASSERT_TRUE(want.count(name)) << name;
      EXPECT_EQ(t.scalar_type(), want[name].scalar_type()) << name;
      EXPECT_TRUE(at::equal(t, want[name])) << name;
    }
    if (c.o.full) EXPECT_EQ(got.meta["zero_saved_world_size"], 3);
    if (!c.o.dtype.empty()) EXPECT_FALSE(rep.kept.empty());
  }
}
