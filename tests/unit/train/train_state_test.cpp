// train/train_state.h: capture -> restore gives back the same model, optimizer slots, RNG
// streams and progress; a checkpoint of another model is refused naming the tensors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "model/model.h"
#include "runtime/check.h"
#include "train/train_state.h"

using namespace hpctrain;

namespace {

ModelPtr linear(int in, int out, c10::Device dev = c10::kCPU) {
  ModelPtr m = module_model(torch::nn::Linear(in, out));
  m->to(dev);
  return m;
}

// A few SGD-with-momentum (or AdamW) steps, so the optimizer has state to carry.
void train_steps(Model& m, torch::optim::Optimizer& opt, int n) {
  for (int k = 0; k < n; ++k) {
    opt.zero_grad();
    m.forward(at::ones({2, 3}, m.named_parameters()[0].second.options())).sum().backward();
    opt.step();
  }
}

std::vector<at::Tensor> params_of(Model& m) {
  std::vector<at::Tensor> out;
  for (auto& [n, t] : m.named_parameters()) out.push_back(t);
  return out;
}

}  // namespace

TEST(TrainState, RoundTripRestoresModelOptimizerRngAndProgress) {
  for (const std::string kind : {"sgd", "adamw"}) {
    ModelPtr a = linear(3, 2);
    std::unique_ptr<torch::optim::Optimizer> oa;
    if (kind == "sgd")
      oa = std::make_unique<torch::optim::SGD>(params_of(*a), torch::optim::SGDOptions(0.1).momentum(0.9));
    else
      oa = std::make_unique<torch::optim::AdamW>(params_of(*a), torch::optim::AdamWOptions(0.01));
    train_steps(*a, *oa, 2);
    TrainProgress p;
    p.step = 17;
    p.epoch = 2;
    p.sampler = {2, 96};
    p.scaler_scale = 1024;
    p.scaler_good = 5;
    at::manual_seed(123);
    CheckpointState st = capture_train_state(*a, *oa, p, {{"model", "linear"}});
    at::Tensor next_a = at::rand({4});  // what the RNG draws after the capture

    ModelPtr b = linear(3, 2);
    std::unique_ptr<torch::optim::Optimizer> ob;
    if (kind == "sgd")
      ob = std::make_unique<torch::optim::SGD>(params_of(*b), torch::optim::SGDOptions(0.1).momentum(0.9));
    else
      ob = std::make_unique<torch::optim::AdamW>(params_of(*b), torch::optim::AdamWOptions(0.01));
    at::manual_seed(999);
    TrainProgress q = restore_train_state(st, *b, *ob);
    EXPECT_EQ(q.step, 17);
    EXPECT_EQ(q.epoch, 2);
    EXPECT_EQ(q.sampler.epoch, 2);
    EXPECT_EQ(q.sampler.samples_consumed, 96);
    EXPECT_DOUBLE_EQ(q.scaler_scale, 1024);
    EXPECT_EQ(q.scaler_good, 5);
    EXPECT_TRUE(at::equal(at::rand({4}), next_a)) << kind << ": the CPU RNG continues where it was";
    // The same next steps from both: identical parameters only if the optimizer state came back.
    train_steps(*a, *oa, 2);
    train_steps(*b, *ob, 2);
    auto pa = a->named_parameters(), pb = b->named_parameters();
    for (size_t i = 0; i < pa.size(); ++i)
      EXPECT_TRUE(at::equal(pa[i].second, pb[i].second)) << kind << " " << pa[i].first;
  }
}

TEST(TrainState, CpuCheckpointHasNoCudaRng) {
  ModelPtr a = linear(3, 2);
  torch::optim::SGD opt(params_of(*a), torch::optim::SGDOptions(0.1));
  CheckpointState st = capture_train_state(*a, opt, {}, {});
  bool cpu = false, cuda = false;
  for (auto& [n, t] : st.tensors) {
    cpu |= n == "state/rng.cpu";
    cuda |= n == "state/rng.cuda";
  }
  EXPECT_TRUE(cpu);
  EXPECT_FALSE(cuda);
}

TEST(TrainState, OtherModelIsRefusedNamingTheMismatch) {
  ModelPtr a = linear(3, 2), b = linear(4, 2);
  torch::optim::SGD oa(params_of(*a), torch::optim::SGDOptions(0.1)), ob(params_of(*b), torch::optim::SGDOptions(0.1));
  CheckpointState st = capture_train_state(*a, oa, {}, {});
  try {
    restore_train_state(st, *b, ob);
    FAIL() << "a [2,3] weight loaded into a [2,4] one";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("weight"), std::string::npos) << e.what();
  }
}

// Label gpu (ctest -L gpu): state/rng.cuda is saved for a model on a GPU and restored.
TEST(TrainStateCuda, CudaRngRoundTrip) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU visible";
  c10::Device dev(c10::kCUDA, 0);
  ModelPtr a = linear(3, 2, dev);
  torch::optim::SGD opt(params_of(*a), torch::optim::SGDOptions(0.1));
  at::manual_seed(7);
  CheckpointState st = capture_train_state(*a, opt, {}, {});
  bool has = false;
  for (auto& [n, t] : st.tensors) has |= n == "state/rng.cuda";
  ASSERT_TRUE(has);
  at::Tensor next = at::rand({8}, at::TensorOptions().device(dev));
  at::manual_seed(1234);
  restore_train_state(st, *a, opt);
  EXPECT_TRUE(at::equal(at::rand({8}, at::TensorOptions().device(dev)), next));
}
