// ZeRO-3 (FsdpEngine) under MPI with 1, 2 and 4 ranks: two units and a root with parameter counts
// that do not divide by the world size; each rank's gradient block equals its block of the
// gradient averaged over ranks by a plain computation, twice (accumulation), and between steps
// a rank holds its shards only (every parameter's storage has 0 bytes).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "comm/blocking.h"
#include "ddp/fsdp.h"
#include "runtime/check.h"
#include "support/test_world.h"

using namespace hpctrain;
using namespace hpctrain::testing;

namespace {

struct Net {
  at::Tensor w0, b0, w1, w2;
  NamedTensors all() const { return {{"w0", w0}, {"b0", b0}, {"w1", w1}, {"w2", w2}}; }
};

Net make_net() {
  at::manual_seed(11);  // the same values everywhere (the engine broadcasts rank 0's anyway)
  Net n;
  n.w0 = at::randn({5, 7}).requires_grad_();
  n.b0 = at::randn({5}).requires_grad_();
  n.w1 = at::randn({3, 5}).requires_grad_();
  n.w2 = at::randn({2, 3}).requires_grad_();
  return n;
}

at::Tensor input(int rank, int k) {
  at::Generator g = at::detail::createCPUGenerator(100 + 7 * rank + k);
  return at::randn({4, 7}, g);
}

}  // namespace

TEST(Fsdp, GradientBlocksMatchAveragedGradientAndShardsOnlyBetweenSteps) {
  Communicator& comm = cpu_comm();
  const int w = comm.size(), r = comm.rank();
  Net ref = make_net(), net = make_net();
  // Reference: the plain model, two backward passes, the gradient summed over ranks / world.
  for (int k = 0; k < 2; ++k) {
    at::Tensor x = input(r, k);
    at::Tensor h = at::tanh(at::linear(x, ref.w0, ref.b0));
    at::Tensor y = at::linear(at::tanh(at::linear(h, ref.w1)), ref.w2);
    y.square().sum().backward();
  }
  std::vector<at::Tensor> ref_grads;
  for (auto& [name, p] : ref.all()) {
    at::Tensor g = p.grad().clone();
    allreduce_now(comm, g, ReduceOp::kSum, "test.ref");
    ref_grads.push_back(g / w);
  }

  FsdpEngine e({{"u0", {{"w0", net.w0}, {"b0", net.b0}}}, {"u1", {{"w1", net.w1}}}}, {"(root)", {{"w2", net.w2}}},
               comm);
  for (auto& [name, p] : net.all()) EXPECT_EQ(p.storage().nbytes(), 0u) << name;
  for (int k = 0; k < 2; ++k) {
    at::Tensor x = input(r, k);
    e.begin_forward();
    at::Tensor h = e.run_unit(0, [&](const at::Tensor& in) { return at::tanh(at::linear(in, net.w0, net.b0)); }, x);
    h = e.run_unit(1, [&](const at::Tensor& in) { return at::tanh(at::linear(in, net.w1)); }, h);
    at::Tensor y = e.end_forward(at::linear(h, net.w2));
    y.square().sum().backward();
    int64_t shard_bytes = 0;
    for (auto& b : e.param_blocks()) shard_bytes += static_cast<int64_t>(b.nbytes());
    EXPECT_EQ(e.resident_param_bytes(), shard_bytes) << "after backward " << k;
    for (auto& [name, p] : net.all()) EXPECT_EQ(p.storage().nbytes(), 0u) << name;
  }
  // Rank r's block of each unit's flat (padded) averaged gradient.
  const std::vector<std::vector<size_t>> units{{0, 1}, {2}, {3}};
  std::vector<at::Tensor> blocks = e.grad_blocks();
  ASSERT_EQ(blocks.size(), 3u);
  for (size_t u = 0; u < units.size(); ++u) {
    std::vector<at::Tensor> parts;
    for (size_t i : units[u]) parts.push_back(ref_grads[i].reshape({-1}));
    at::Tensor flat = at::cat(parts);
    const int64_t padded = (flat.numel() + w - 1) / w * w, block = padded / w;
    flat = at::constant_pad_nd(flat, {0, padded - flat.numel()});
    EXPECT_TRUE(at::allclose(blocks[u], flat.narrow(0, r * block, block), 1e-5, 1e-6)) << "unit " << u;
  }
  // The gathered full values equal the initial ones, and gathering leaves nothing resident.
  NamedTensors full = e.gather_unit(0);
  EXPECT_TRUE(at::equal(full[0].second, make_net().w0));
  for (auto& [name, p] : net.all()) EXPECT_EQ(p.storage().nbytes(), 0u) << name;
}

// Units on the meta device (a model built without memory): no broadcast; each parameter becomes a
// CPU tensor over the unit's released buffer (unit_params) and init_shards fills this rank's
// blocks one parameter at a time, exactly as the broadcast path would from the same values.
TEST(Fsdp, MetaUnitsAreFilledShardByShardFromInit) {
  Communicator& comm = cpu_comm();
  Net ref = make_net();
  FsdpEngine whole({{"u0", {{"w0", ref.w0}, {"b0", ref.b0}}}, {"u1", {{"w1", ref.w1}}}}, {"(root)", {{"w2", ref.w2}}},
                   comm);
  const Net values = make_net();
  auto meta = [](const at::Tensor& t) { return at::empty(t.sizes(), t.options().device(at::kMeta)).requires_grad_(); };
  FsdpEngine e({{"u0", {{"w0", meta(values.w0)}, {"b0", meta(values.b0)}}}, {"u1", {{"w1", meta(values.w1)}}}},
               {"(root)", {{"w2", meta(values.w2)}}}, comm);
  for (size_t u = 0; u < e.num_units(); ++u)
    for (auto& p : e.unit_params(u)) {
      EXPECT_TRUE(p.device().is_cpu());
      EXPECT_TRUE(p.requires_grad());
      EXPECT_EQ(p.storage().nbytes(), 0u);
    }
  std::vector<std::string> order;
  e.init_shards({"w0", "b0", "w1", "w2"}, [&](const std::string& name, at::Tensor& out) {
    order.push_back(name);
    for (auto& [n, v] : values.all())
      if (n == name) out.copy_(v.detach());
  });
  EXPECT_EQ(order, (std::vector<std::string>{"w0", "b0", "w1", "w2"}));
  for (size_t u = 0; u < e.num_units(); ++u) EXPECT_TRUE(at::equal(e.param_blocks()[u], whole.param_blocks()[u]));
  EXPECT_TRUE(at::equal(e.gather_unit(1)[0].second, values.w1));
  EXPECT_THROW(e.init_shards({"w0", "b0", "w1"}, [](const std::string&, at::Tensor& out) { out.zero_(); }), Error);
}
