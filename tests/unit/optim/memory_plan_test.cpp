// hpctrain plan's figures: gpt's analytic parameter list equals the built model's, and each
// stage's bytes follow optim/memory_plan.h's formulas (padding per bucket, slots per optimizer).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "model/gpt.h"
#include "optim/memory_plan.h"
#include "runtime/check.h"

using namespace hpctrain;

TEST(MemoryPlan, GptParameterListEqualsTheBuiltModel) {
  for (bool bias : {true, false}) {
    GptOptions o;
    o.vocab_size = 61, o.block_size = 9, o.n_layer = 3, o.n_head = 2, o.n_embd = 8, o.bias = bias;
    auto want = gpt_parameter_numels(o);
    ModelPtr m = make_gpt(o);
    auto got = m->named_parameters();
    ASSERT_EQ(got.size(), want.size()) << "bias " << bias;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].first, want[i].first);
      EXPECT_EQ(got[i].second.numel(), want[i].second) << want[i].first;
    }
  }
}

TEST(MemoryPlan, StagesFollowTheFormulas) {
  // 3 parameters of 7, 5 and 1 elements on 4 ranks: one bucket of 13 padded to 16.
  std::vector<std::pair<std::string, int64_t>> ps{{"a.weight", 7}, {"b.weight", 5}, {"bias", 1}};
  MemoryPlanOptions o;
  o.world = 4;
  o.optimizer_slots = 2;
  auto s = plan_memory(ps, o);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].parameters, 4 * 13);
  EXPECT_EQ(s[0].gradients, 4 * 13);
  EXPECT_EQ(s[0].optimizer_state, 8 * 13);
  EXPECT_EQ(s[1].parameters, 4 * 16);
  EXPECT_EQ(s[1].gradients, 4 * 16 + 4 * 4);
  EXPECT_EQ(s[1].optimizer_state, 8 * 4);
  EXPECT_EQ(s[2].gradients, 4 * 4);
  EXPECT_EQ(s[2].padding, 3);
  for (const auto& x : s) EXPECT_EQ(x.total(), x.parameters + x.gradients + x.optimizer_state + x.largest_unit);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(s[k].largest_unit, 0);
  // Stage 3: units a (7 -> 8), b (5 -> 8), (root) (1 -> 4): shards 2 + 2 + 1.
  EXPECT_EQ(s[3].parameters, 4 * 5);
  EXPECT_EQ(s[3].largest_unit, 4 * 8);
  EXPECT_EQ(optimizer_slots("sgd", 0.9), 1);
  EXPECT_EQ(optimizer_slots("sgd", 0), 0);
  EXPECT_THROW(optimizer_slots("lion", 0), Error);
  o.world = 0;
  EXPECT_THROW(plan_memory(ps, o), Error);
}

TEST(MemoryPlan, Stage3UnitsAreGptBlocksAndTopLevelSubmodules) {
  EXPECT_EQ(stage3_unit_of("transformer.h.12.attn.c_attn.weight"), "transformer.h.12");
  EXPECT_EQ(stage3_unit_of("transformer.wte.weight"), "transformer");
  EXPECT_EQ(stage3_unit_of("features.0.weight"), "features");
  EXPECT_EQ(stage3_unit_of("scale"), "(root)");
}

// --amp bf16 (bf16_gather): a unit's gathered bytes are 2 per padded element plus 4 per element
// of its vectors (FsdpEngine::largest_unit_bytes); the root's stay 4 per padded element.
TEST(MemoryPlan, Stage3Bf16GatherHalvesTheUnitsButNotTheirVectorsOrTheRoot) {
  std::vector<std::pair<std::string, int64_t>> ps{
      {"transformer.wte.weight", 30}, {"transformer.h.0.w", 21}, {"transformer.h.0.b", 3}, {"transformer.ln_f.weight", 2}};
  MemoryPlanOptions o;
  o.world = 4;
  o.vectors = {"transformer.h.0.b", "transformer.ln_f.weight"};
  EXPECT_EQ(plan_memory(ps, o)[3].largest_unit, 4 * 32);  // fp32: the root (32 elements padded)
  o.bf16_gather = true;
  auto s3 = plan_memory(ps, o)[3];
  EXPECT_EQ(s3.largest_unit, 4 * 32);  // the root stays fp32: 128 bytes > the block's 2 * 24 + 4 * 3
  o.vectors.clear();
  ps[0].second = 6;  // the root now 8 padded (32 bytes); the block 24 padded, 48 bytes in bf16
  s3 = plan_memory(ps, o)[3];
  EXPECT_EQ(s3.largest_unit, 2 * 24);
  EXPECT_EQ(s3.largest_unit_name, "transformer.h.0");
  EXPECT_TRUE(stage3_is_root("transformer"));
  EXPECT_TRUE(stage3_is_root("(root)"));
  EXPECT_FALSE(stage3_is_root("features"));
}
