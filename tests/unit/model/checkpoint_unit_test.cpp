// checkpoint_unit (model/checkpoint_unit.h): gradients equal to the plain computation's with
// dropout (the RNG replay) and a parameter used twice inside the unit and once outside it (its
// gradient hook fires once per backward), the run's random stream unchanged, no node without
// grad, parameters trained through a unit whose input needs no gradient, autocast replayed, and
// the zoo GPT with its blocks checkpointed.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "model/checkpoint_unit.h"
#include "model/gpt.h"

using namespace hpctrain;

namespace {

// Counts the runs of a parameter's AccumulateGrad node, where DDP's hooks sit (ddp/ddp.cpp).
struct CountHook final : torch::autograd::FunctionPostHook {
  explicit CountHook(int* n) : n(n) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    ++*n;
    return outputs;
  }
  int* n;
};

// x [4,8], w [8,8] used twice, b [8]; dropout draws from the default generator.
at::Tensor unit_fn(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return at::matmul(at::dropout(at::gelu(at::matmul(x, w)), 0.3, /*train=*/true), w.t()) + b;
}

struct Grads {
  at::Tensor x, w, b, after;  // `after`: a draw from the generator once backward is done
  int w_hooks = 0;
};

Grads run(bool checkpoint, bool w_outside = true) {
  at::manual_seed(7);
  at::Tensor x = at::randn({4, 8}).requires_grad_(true);
  at::Tensor w = (at::randn({8, 8}) * 0.3).requires_grad_(true);
  at::Tensor b = at::randn({8}).requires_grad_(true);
  Grads g;
  auto acc = torch::autograd::impl::grad_accumulator(w);
  acc->add_post_hook(std::make_unique<CountHook>(&g.w_hooks));
  at::Tensor h = at::tanh(x);
  auto f = [&](const at::Tensor& in) { return unit_fn(in, w, b); };
  at::Tensor y = checkpoint ? checkpoint_unit(f, h, {w, b}) : f(h);
  y = checkpoint ? checkpoint_unit(f, y, {w, b}) : f(y);  // two units in a row, as blocks are
  at::Tensor loss = (y * at::arange(8, at::kFloat)).sum();
  if (w_outside) loss = loss + (w * w).sum();  // w also used outside the units
  loss.backward();
  g.x = x.grad(), g.w = w.grad(), g.b = b.grad();
  g.after = at::rand({4});
  return g;
}

void expect_close(const at::Tensor& a, const at::Tensor& b, const char* what) {
  ASSERT_TRUE(a.defined() && b.defined()) << what;
  const double rel = (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-30);
  EXPECT_LE(rel, 1e-6) << what;
}

}  // namespace

TEST(CheckpointUnit, GradientsEqualPlainWithDropoutAndASharedParameter) {
  Grads plain = run(false), ckpt = run(true);
  expect_close(ckpt.x, plain.x, "x");
  expect_close(ckpt.w, plain.w, "w (twice in each unit, twice in units, once outside)");
  expect_close(ckpt.b, plain.b, "b");
  EXPECT_EQ(ckpt.w_hooks, 1);  // its AccumulateGrad runs once per backward, as without
  EXPECT_EQ(plain.w_hooks, 1);
  EXPECT_TRUE(at::equal(ckpt.after, plain.after)) << "the recompute must leave the random stream where it was";
  EXPECT_GE(recompute_totals().units, 2);
}

TEST(CheckpointUnit, DifferentDropoutMaskWouldShow) {
  // The test above means something: without the replay the second draw differs.
  at::manual_seed(7);
  at::Tensor a = at::dropout(at::ones({64}), 0.3, true), b = at::dropout(at::ones({64}), 0.3, true);
  EXPECT_FALSE(at::equal(a, b));
}

TEST(CheckpointUnit, PlainWithoutGradAndParametersTrainedWhenTheInputNeedsNoGrad) {
  at::Tensor w = at::randn({8, 8}).requires_grad_(true), b = at::zeros({8}).requires_grad_(true);
  auto f = [&](const at::Tensor& in) { return at::matmul(in, w) + b; };
  {
    at::NoGradGuard no_grad;
    EXPECT_FALSE(checkpoint_unit(f, at::randn({2, 8}), {w, b}).requires_grad());
  }
  at::Tensor x = at::randn({2, 8});  // data: no gradient wanted
  at::Tensor y = checkpoint_unit(f, x, {w, b});
  ASSERT_TRUE(y.requires_grad());
  y.sum().backward();
  expect_close(w.grad(), x.sum(0).unsqueeze(1).expand({8, 8}), "w");
  expect_close(b.grad(), at::full({8}, 2.0), "b");
}

TEST(CheckpointUnit, AutocastStateReplayed) {
  auto grads = [](bool checkpoint) {
    at::manual_seed(3);
    at::Tensor x = at::randn({4, 16}).requires_grad_(true), w = at::randn({16, 16}).requires_grad_(true);
    auto f = [&](const at::Tensor& in) { return at::relu(at::matmul(in, w)); };
    at::autocast::set_autocast_enabled(at::kCPU, true);
    at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
    at::Tensor y = checkpoint ? checkpoint_unit(f, x, {w}) : f(x);
    at::autocast::set_autocast_enabled(at::kCPU, false);
    at::autocast::clear_cache();
    EXPECT_EQ(y.scalar_type(), at::kBFloat16);
    y.to(at::kFloat).sum().backward();
    return std::make_pair(x.grad(), w.grad());
  };
  auto plain = grads(false), ckpt = grads(true);
  EXPECT_EQ(ckpt.second.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(ckpt.first, plain.first));   // recomputed in bf16, as the forward was
  EXPECT_TRUE(at::equal(ckpt.second, plain.second));
}

TEST(CheckpointUnit, GptBlocksWithDropout) {
  ModelSpec spec;
  spec.name = "gpt";
  spec.vocab_size = 64, spec.seq_len = 16, spec.sample_shape = {16}, spec.num_classes = 64;
  spec.model_config = "n_layer=3,n_head=2,n_embd=32,dropout=0.2";
  auto grads = [&](bool on) {
    at::manual_seed(1);
    ModelPtr m = make_gpt(gpt_options(spec));
    EXPECT_EQ(m->set_activation_checkpointing(on), 3);
    m->train(true);
    at::Tensor idx = at::randint(64, {2, 16}, at::kLong);
    at::Tensor logits = m->forward(idx);
    at::cross_entropy_loss(logits.view({-1, 64}), idx.view({-1})).backward();
    std::vector<at::Tensor> g;
    for (auto& [name, p] : m->named_parameters()) g.push_back(p.grad());
    return g;
  };
  auto plain = grads(false), ckpt = grads(true);
  ASSERT_EQ(plain.size(), ckpt.size());
  for (size_t i = 0; i < plain.size(); ++i) expect_close(ckpt[i], plain[i], "gpt parameter");
}
