// ZeRO-3's bf16 gather (FsdpOptions::param_dtype, ddp/fsdp_gather.cpp) under MPI with 1, 2 and
// 4 ranks, on two units and a root whose counts do not divide by the world size:
// - a unit's matrices are bf16 parameters holding the round-to-nearest bf16 of the fp32 masters,
//   its vectors float32 parameters holding the same rounded values, the root stays float32;
// - the gradient blocks equal a plain autocast model run on those rounded values (fp32 leaves),
//   averaged over ranks (the bf16 weight gradients are the ones autocast's casts pass back);
// - the gathered bytes per step: each unit's padded elements at 2 bytes, twice (forward and
//   backward), the root's at 4 bytes once; largest_unit_bytes counts a unit's bf16 buffer and
//   its vectors' fp32 values;
// - between steps only the shards are resident; gather_unit returns the unrounded fp32 masters,
//   and a resume (materialize, load into the parameters, shard_from_params) keeps fp32 values.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "comm/blocking.h"
#include "ddp/fsdp.h"
#include "optim/amp.h"
#include "support/test_world.h"

using namespace hpctrain;
using namespace hpctrain::testing;

namespace {

struct Net {
  at::Tensor w0, b0, w1, w2;
  NamedTensors all() const { return {{"w0", w0}, {"b0", b0}, {"w1", w1}, {"w2", w2}}; }
};

Net make_net() {
  at::manual_seed(11);
  Net n;
  n.w0 = at::randn({5, 7}).requires_grad_();
  n.b0 = at::randn({5}).requires_grad_();
  n.w1 = at::randn({3, 5}).requires_grad_();
  n.w2 = at::randn({2, 3}).requires_grad_();
  return n;
}

at::Tensor rounded(const at::Tensor& t) { return t.detach().to(at::kBFloat16).to(at::kFloat); }
at::Tensor input(int rank, int k) {
  at::Generator g = at::detail::createCPUGenerator(100 + 7 * rank + k);
  return at::randn({4, 7}, g);
}
int64_t padded(int64_t n, int w) { return (n + w - 1) / w * w; }

FsdpEngine make_engine(const Net& net, Communicator& comm) {
  FsdpOptions o;
  o.param_dtype = at::kBFloat16;
  return FsdpEngine({{"u0", {{"w0", net.w0}, {"b0", net.b0}}}, {"u1", {{"w1", net.w1}}}}, {"(root)", {{"w2", net.w2}}},
                    comm, o);
}

}  // namespace

TEST(FsdpBf16, UnitsComputeOnRoundedMastersAndReduceIntoFp32Blocks) {
  Communicator& comm = cpu_comm();
  const int w = comm.size(), r = comm.rank();
  const Net init = make_net();
  // Reference: fp32 leaves holding the bf16-rounded values (the root's exact), under autocast.
  Net ref{rounded(init.w0).requires_grad_(), rounded(init.b0).requires_grad_(), rounded(init.w1).requires_grad_(),
          init.w2.detach().clone().requires_grad_()};
  for (int k = 0; k < 2; ++k) {
    AutocastScope autocast("bf16", false);
    at::Tensor h = at::tanh(at::linear(input(r, k), ref.w0, ref.b0));
    at::Tensor y = at::linear(at::tanh(at::linear(h, ref.w1)), ref.w2);
    y.to(at::kFloat).square().sum().backward();
  }
  std::vector<at::Tensor> ref_grads;
  for (auto& [name, p] : ref.all()) {
    at::Tensor g = p.grad().clone();
    allreduce_now(comm, g, ReduceOp::kSum, "test.ref");
    ref_grads.push_back(g / w);
  }

  Net net = make_net();
  FsdpEngine e = make_engine(net, comm);
  EXPECT_EQ(e.gather_dtype_name(), "bfloat16");
  EXPECT_EQ(net.w0.scalar_type(), at::kBFloat16);
  EXPECT_EQ(net.w1.scalar_type(), at::kBFloat16);
  EXPECT_EQ(net.b0.scalar_type(), at::kFloat);  // a vector
  EXPECT_EQ(net.w2.scalar_type(), at::kFloat);  // the root
  const int64_t u0 = padded(35 + 5, w), u1 = padded(15, w), root = padded(6, w);
  EXPECT_EQ(e.largest_unit_bytes(), std::max({2 * u0 + 4 * 5, 2 * u1, 4 * root}));
  for (int k = 0; k < 2; ++k) {
    AutocastScope autocast("bf16", false);
    e.begin_forward();
    at::Tensor h = e.run_unit(
        0,
        [&](const at::Tensor& in) {
          EXPECT_TRUE(at::equal(net.w0.detach(), init.w0.detach().to(at::kBFloat16)));
          EXPECT_TRUE(at::equal(net.b0.detach(), rounded(init.b0)));
          return at::tanh(at::linear(in, net.w0, net.b0));
        },
        input(r, k));
    h = e.run_unit(1, [&](const at::Tensor& in) { return at::tanh(at::linear(in, net.w1)); }, h);
    at::Tensor y = e.end_forward(at::linear(h, net.w2));
    y.to(at::kFloat).square().sum().backward();
    EXPECT_EQ(e.stats().bytes_gathered, (k + 1) * (2 * 2 * (u0 + u1) + 4 * root)) << "backward " << k;
    int64_t shard_bytes = 0;
    for (auto& b : e.param_blocks()) shard_bytes += static_cast<int64_t>(b.nbytes());
    EXPECT_EQ(e.resident_param_bytes(), shard_bytes) << "after backward " << k;
    for (auto& [name, p] : net.all()) EXPECT_EQ(p.storage().nbytes(), 0u) << name;
  }
  const std::vector<std::vector<size_t>> units{{0, 1}, {2}, {3}};
  std::vector<at::Tensor> blocks = e.grad_blocks();
  ASSERT_EQ(blocks.size(), 3u);
  for (size_t u = 0; u < units.size(); ++u) {
    std::vector<at::Tensor> parts;
    for (size_t i : units[u]) parts.push_back(ref_grads[i].reshape({-1}));
    at::Tensor flat = at::cat(parts);
    const int64_t pad = padded(flat.numel(), w), block = pad / w;
    flat = at::constant_pad_nd(flat, {0, pad - flat.numel()});
    EXPECT_EQ(blocks[u].scalar_type(), at::kFloat);
    EXPECT_TRUE(at::allclose(blocks[u], flat.narrow(0, r * block, block), 1e-5, 1e-6)) << "unit " << u;
  }
  // The checkpoint's values: the fp32 masters, not their bf16 rounding.
  NamedTensors full = e.gather_unit(0);
  EXPECT_EQ(full[0].second.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(full[0].second, init.w0.detach()));
  EXPECT_FALSE(at::equal(full[0].second, rounded(init.w0)));
}

// Outside any autocast scope a bf16 unit still runs (under its own bf16 autocast), and a resume
// loads unrounded fp32 values into the masters.
TEST(FsdpBf16, RunsWithoutCallerAutocastAndResumesFp32Masters) {
  Communicator& comm = cpu_comm();
  Net net = make_net();
  FsdpEngine e = make_engine(net, comm);
  {
    at::NoGradGuard no_grad;
    e.begin_forward();
    at::Tensor h = e.run_unit(0, [&](const at::Tensor& in) { return at::linear(in, net.w0, net.b0); }, input(0, 0));
    EXPECT_EQ(h.scalar_type(), at::kBFloat16);
    e.end_forward(h);
  }
  e.materialize();
  EXPECT_EQ(net.w0.scalar_type(), at::kFloat);
  const Net other = make_net();
  at::Tensor want = other.w0.detach() * 1.001;  // not representable in bf16
  {
    at::NoGradGuard no_grad;
    net.w0.copy_(want);
    net.b0.copy_(other.b0.detach());
    net.w1.copy_(other.w1.detach());
    net.w2.copy_(other.w2.detach());
  }
  e.shard_from_params(true);
  EXPECT_EQ(net.w0.scalar_type(), at::kBFloat16);
  EXPECT_EQ(net.w0.storage().nbytes(), 0u);
  EXPECT_TRUE(at::equal(e.gather_unit(0)[0].second, want));
}
