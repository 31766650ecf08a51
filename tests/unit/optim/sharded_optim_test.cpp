// ShardedOptimizer over arbitrary blocks of a flat space == torch::optim on the whole tensors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "runtime/check.h"
#include "optim/sharded_optim.h"

using namespace hpctrain;

namespace {

void run(const ShardedOptimOptions& o, std::unique_ptr<torch::optim::Optimizer> (*make)(at::Tensor)) {
  torch::manual_seed(3);
  at::Tensor ref = at::randn({101}).requires_grad_();
  at::Tensor flat = ref.detach().clone();
  at::Tensor grad = at::zeros({101});
  auto topt = make(ref);
  // Three uneven blocks, as a rank's blocks of three buckets.
  std::vector<at::Tensor> ps = {flat.narrow(0, 0, 13), flat.narrow(0, 13, 50), flat.narrow(0, 63, 38)};
  std::vector<at::Tensor> gs = {grad.narrow(0, 0, 13), grad.narrow(0, 13, 50), grad.narrow(0, 63, 38)};
  ShardedOptimizer sopt(o, ps, gs);
  for (int step = 0; step < 25; ++step) {
    at::Tensor g = at::randn({101});
    ref.mutable_grad() = g.clone();
    grad.copy_(g);
    double lr = o.lr * (1 + 0.1 * step);
    for (auto& group : topt->param_groups()) group.options().set_lr(lr);
    sopt.set_lr(lr);
    topt->step();
    sopt.step();
  }
  double rel = (flat - ref.detach()).norm().item<double>() / ref.detach().norm().item<double>();
  EXPECT_LE(rel, 1e-7) << o.name;
  EXPECT_EQ(sopt.steps(), 25);
}

}  // namespace

TEST(ShardedOptimizer, SgdMomentumNesterovWeightDecayMatchesTorch) {
  ShardedOptimOptions o;
  o.name = "sgd", o.lr = 0.05, o.momentum = 0.9, o.nesterov = true, o.weight_decay = 1e-3;
  run(o, [](at::Tensor p) -> std::unique_ptr<torch::optim::Optimizer> {
    return std::make_unique<torch::optim::SGD>(
        std::vector<at::Tensor>{p}, torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(1e-3));
  });
}

TEST(ShardedOptimizer, PlainSgdMatchesTorch) {
  ShardedOptimOptions o;
  o.name = "sgd", o.lr = 0.1;
  run(o, [](at::Tensor p) -> std::unique_ptr<torch::optim::Optimizer> {
    return std::make_unique<torch::optim::SGD>(std::vector<at::Tensor>{p}, torch::optim::SGDOptions(0.1));
  });
}

TEST(ShardedOptimizer, AdamWMatchesTorch) {
  ShardedOptimOptions o;
  o.name = "adamw", o.lr = 0.003, o.weight_decay = 0.05;
  run(o, [](at::Tensor p) -> std::unique_ptr<torch::optim::Optimizer> {
    return std::make_unique<torch::optim::AdamW>(std::vector<at::Tensor>{p},
                                                 torch::optim::AdamWOptions(0.003).weight_decay(0.05));
  });
}

TEST(ShardedOptimizer, StateRoundTripAndBytes) {
  at::Tensor p = at::randn({40}), g = at::randn({40});
  ShardedOptimOptions o;
  o.name = "adamw";
  ShardedOptimizer a(o, {p.narrow(0, 0, 40)}, {g.narrow(0, 0, 40)});
  EXPECT_EQ(a.state_bytes(), 2 * 40 * 4);
  a.step();
  a.step();
  ShardedOptimizer b(o, {p.clone()}, {g.clone()});
  b.load_state(a.state(), a.steps());
  EXPECT_EQ(b.steps(), 2);
  EXPECT_TRUE(at::equal(b.state().at("exp_avg_sq"), a.state().at("exp_avg_sq")));
  EXPECT_THROW(b.load_state({{"exp_avg", at::zeros({39})}}, 1), Error);
  ShardedOptimOptions s;
  s.name = "sgd", s.momentum = 0.9;
  ShardedOptimizer c(s, {p.narrow(0, 0, 40)}, {g.narrow(0, 0, 40)});
  EXPECT_EQ(c.state_bytes(), 40 * 4);  // the momentum buffer, counted before it exists
  EXPECT_TRUE(c.state().empty());
  c.step();
  EXPECT_EQ(c.state().count("momentum_buffer"), 1u);
}

TEST(ShardedOptimizer, UnknownOptimizerIsAnError) {
  EXPECT_THROW(check_sharded_optimizer("lamb"), Error);
  ShardedOptimOptions o;
  o.name = "lamb";
  EXPECT_THROW(ShardedOptimizer(o, {}, {}), Error);
}
