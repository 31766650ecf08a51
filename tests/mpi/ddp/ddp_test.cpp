// DDP under MPI with 1, 2 and 4 ranks. The central invariant: N ranks with per-rank batch B
// end with the same parameters as one process trained on the concatenated N*B batch.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "ddp/ddp.h"
#include "models.h"
#include "runtime/check.h"
#include "support/ddp_batches.h"
#include "support/recording_comm.h"
#include "support/test_world.h"

using namespace hpctrain;
using namespace hpctrain::testing;

namespace {

constexpr int kSteps = 20;
constexpr int64_t kB = 4;  // per-rank batch

template <class Model>
Model seeded(uint64_t seed) {
  torch::manual_seed(seed);
  return Model();
}

torch::optim::SGD sgd(torch::nn::Module& m) {
  return torch::optim::SGD(m.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-3));
}

// One process, full global batch: the reference.
template <class Model>
void train_reference(Model& m, const Batches& data, int micro = 1) {
  auto opt = sgd(*m);
  for (size_t s = 0; s < data.x.size(); ++s) {
    opt.zero_grad();
    at::cross_entropy_loss(m->forward(data.x[s]), data.y[s]).backward();
    opt.step();
  }
}

// DDP: this rank's rows of each global batch, optionally split into `micro` no_sync steps.
template <class Model>
void train_ddp(Model& m, const Batches& data, double cap_mb, int micro = 1) {
  DistributedDataParallel ddp(m.ptr(), cpu_comm(), DdpOptions{cap_mb});
  auto opt = sgd(*m);
  for (size_t s = 0; s < data.x.size(); ++s) {
    ddp.zero_grad();
    ddp_backward(ddp, m, data.x[s], data.y[s], world().rank(), world().size(), micro);
    opt.step();
  }
}

template <class Model>
void check_equivalence(std::vector<int64_t> sample_shape) {
  int n = world().size();
  Batches data = make_batches(kSteps, n * kB, sample_shape, 7);
  auto ref = seeded<Model>(100);  // rank 0's initial model; DDP broadcasts it
  train_reference(ref, data);
  std::vector<double> diffs;
  for (double cap : {0.001, 1.0, 25.0, 10000.0}) {
    auto m = seeded<Model>(100 + world().rank());  // different seeds per rank on purpose
    train_ddp(m, data, cap);
    double d = max_rel_diff(*m, *ref);
    EXPECT_LE(d, 1e-5) << "bucket cap " << cap << " MiB";
    diffs.push_back(d);
  }
}

TEST(DdpEquivalence, MlpMatchesSingleProcessOnConcatenatedBatch) { check_equivalence<TinyMlp>({20}); }

TEST(DdpEquivalence, CnnMatchesSingleProcessOnConcatenatedBatch) { check_equivalence<TinyCnn>({1, 16, 16}); }

TEST(DdpNoSync, FourMicroBatchesEqualOneStepOnFourTimesTheBatch) {
  int n = world().size();
  Batches data = make_batches(5, n * kB * 4, {20}, 11);
  auto ref = seeded<TinyMlp>(5);
  train_reference(ref, data);
  auto m = seeded<TinyMlp>(5);
  train_ddp(m, data, 25.0, /*micro=*/4);
  EXPECT_LE(max_rel_diff(*m, *ref), 1e-5);
}

TEST(DdpBroadcast, RankZeroOverridesDifferentSeeds) {
  auto m = seeded<TinyMlp>(1234 + 17 * world().rank());
  DistributedDataParallel ddp(m.ptr(), cpu_comm());
  auto ref = seeded<TinyMlp>(1234);
  EXPECT_EQ(max_rel_diff(*m, *ref), 0.0);
}

TEST(DdpUnused, DefaultIsAnErrorNamingTheParameterOnEveryRank) {
  torch::manual_seed(3);
  TinyMlp m(20, 32, 5, /*with_unused=*/true);
  DistributedDataParallel ddp(m.ptr(), cpu_comm());
  at::Tensor loss = at::cross_entropy_loss(m->forward(at::randn({kB, 20})), at::zeros({kB}, at::kLong));
  try {
    ddp.backward(loss);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("unused.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unused.bias"), std::string::npos) << msg;
    EXPECT_NE(msg.find("find_unused_parameters"), std::string::npos) << msg;
  }
  // The reducer is usable again afterwards (state was reset), and nothing is left in flight.
  cpu_comm().barrier()->wait();
}

TEST(DdpUnused, FindUnusedParametersGivesTheCorrectResult) {
  int n = world().size();
  Batches data = make_batches(5, n * kB, {20}, 5);
  torch::manual_seed(8);
  TinyMlp ref(20, 32, 5, true);
  torch::optim::SGD ref_opt(ref->parameters(), torch::optim::SGDOptions(0.1));
  for (int s = 0; s < 5; ++s) {
    ref_opt.zero_grad();
    at::cross_entropy_loss(ref->forward(data.x[s]), data.y[s]).backward();
    ref_opt.step();
  }
  torch::manual_seed(8);
  TinyMlp m(20, 32, 5, true);
  DistributedDataParallel ddp(m.ptr(), cpu_comm(), DdpOptions{25.0, 1.0, /*find_unused=*/true});
  torch::optim::SGD opt(m->parameters(), torch::optim::SGDOptions(0.1));
  for (int s = 0; s < 5; ++s) {
    ddp.zero_grad();
    at::Tensor x = data.x[s].narrow(0, world().rank() * kB, kB);
    at::Tensor y = data.y[s].narrow(0, world().rank() * kB, kB);
    ddp.backward(at::cross_entropy_loss(m->forward(x), y));
    opt.step();
  }
  EXPECT_LE(max_rel_diff(*m, *ref), 1e-5);
}

TEST(DdpConstruction, ShapeMismatchIsAnErrorOnAllRanks) {
  if (world().size() == 1) GTEST_SKIP() << "needs 2 ranks";
  TinyMlp m(20, world().rank() == 1 ? 33 : 32, 5);
  try {
    DistributedDataParallel ddp(m.ptr(), cpu_comm());
    FAIL() << "expected an error";
  } catch (const CollectiveError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("fc1.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[33,20]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[32,20]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
  }
}

TEST(DdpReducer, HookOrderDiffersPerRankButCollectiveOrderAndResultsAgree) {
  const int nparams = 9;
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  std::vector<ParamSpec> specs;
  for (int i = 0; i < nparams; ++i) {
    params.push_back(at::zeros({100 + i}).requires_grad_());
    names.push_back("p" + std::to_string(i));
    specs.push_back({names.back(), 100 + i, 4, "float32", "cpu"});
  }
  RecordingComm rec(cpu_comm());
  Reducer reducer(params, names, make_bucket_plan(specs, 900, 500), rec, {});
  ASSERT_GT(reducer.plan().buckets.size(), 2u);
  // Simulate autograd: write each gradient into .grad, then fire hooks in a rank-specific order.
  std::vector<size_t> order(nparams);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(1000 + world().rank());
  std::shuffle(order.begin(), order.end(), rng);
  int r = world().rank(), n = world().size();
  for (size_t i : order) {
    params[i].mutable_grad().fill_(static_cast<double>(i + r));
    reducer.on_grad_ready(i);
  }
  reducer.finalize();
  for (int i = 0; i < nparams; ++i) {
    double want = i + (n - 1) / 2.0;  // mean over ranks of (i + r)
    EXPECT_TRUE(at::allclose(params[i].grad(), at::full({100 + i}, want))) << "param " << i;
  }
  // Same collective sequence on every rank: compare the logs through an allgather.
  std::string log = rec.log;
  at::Tensor bytes = at::empty({static_cast<int64_t>(log.size())}, at::kByte);
  std::memcpy(bytes.data_ptr(), log.data(), log.size());
  std::vector<at::Tensor> all;
  cpu_comm().allgather(bytes, &all)->wait();
  for (auto& t : all) EXPECT_TRUE(at::equal(t, all[0])) << log;
  if (n > 1) {
    EXPECT_EQ(log.rfind("ddp.bucket[0];ddp.bucket[1];", 0), 0u) << log;
  }
}

class FakeCudaComm final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  c10::DeviceType device_type() const override { return c10::DeviceType::CUDA; }
  std::string name() const override { return "nccl"; }
  WorkHandle allreduce(at::Tensor, ReduceOp, std::string) override { return nullptr; }
  WorkHandle allreduce(std::vector<at::Tensor>, ReduceOp, std::string) override { return nullptr; }
  WorkHandle broadcast(at::Tensor, int, std::string) override { return nullptr; }
  WorkHandle allgather(at::Tensor, std::vector<at::Tensor>*, std::string) override { return nullptr; }
  WorkHandle barrier(std::string) override { return nullptr; }
};

TEST(DdpReducer, ModelOnAnotherDeviceThanTheCommunicatorNamesBoth) {
  FakeCudaComm comm;
  std::vector<at::Tensor> params = {at::zeros({3}).requires_grad_()};
  try {
    Reducer reducer(params, {"fc.weight"}, make_bucket_plan({{"fc.weight", 3}}, 1 << 20), comm, {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("fc.weight is on cpu"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cuda"), std::string::npos) << msg;
  }
}

TEST(DdpReducer, GradientsStayInBucketMemoryAcrossSteps) {
  torch::manual_seed(1);
  TinyMlp m;
  DistributedDataParallel ddp(m.ptr(), cpu_comm());
  std::vector<const void*> ptrs;
  for (int step = 0; step < 3; ++step) {
    ddp.zero_grad();
    ddp.backward(at::cross_entropy_loss(m->forward(at::randn({kB, 20})), at::zeros({kB}, at::kLong)));
    std::vector<const void*> now;
    for (auto& p : m->parameters()) now.push_back(p.grad().data_ptr());
    if (step == 0)
      ptrs = now;
    else
      EXPECT_EQ(now, ptrs) << "gradients moved out of bucket memory at step " << step;
  }
  EXPECT_EQ(ddp.last_step().buckets, static_cast<int>(ddp.plan().buckets.size()));
  // What was handed to the allreduces: every gradient's bytes, once; nothing in a world of one.
  int64_t grad_bytes = 0;
  for (auto& p : m->parameters()) grad_bytes += static_cast<int64_t>(p.nbytes());
  EXPECT_EQ(ddp.last_step().bytes_reduced, world().size() > 1 ? grad_bytes : 0);
  EXPECT_EQ(ddp.reducer().bytes_per_step(), ddp.last_step().bytes_reduced);
}


// --grad-comm-dtype: gradients reduced in bfloat16/float16 equal the float32 average within
// that type's rounding, hold the same bits on every rank, and cross as half the bytes.
TEST(DdpGradCommDtype, HalfPrecisionReductionIsTheAverageWithinRounding) {
  const int n = world().size(), r = world().rank();
  Batches data = make_batches(1, n * kB, {20}, 11);
  at::Tensor x = data.x[0].narrow(0, r * kB, kB), y = data.y[0].narrow(0, r * kB, kB);
  auto grads = [&](at::ScalarType dt, int64_t* bytes) {
    torch::manual_seed(5);
    TinyMlp m;
    DdpOptions o{0.001};  // several buckets
    o.grad_comm_dtype = dt;
    DistributedDataParallel ddp(m.ptr(), cpu_comm(), o);
    ddp.zero_grad();
    ddp.backward(at::cross_entropy_loss(m->forward(x), y));
    *bytes = ddp.last_step().bytes_reduced;
    EXPECT_EQ(ddp.reducer().bytes_per_step(), *bytes);
    // what the buckets travel in: the asked dtype where there is something to reduce
    EXPECT_EQ(ddp.reducer().wire_dtype(), n > 1 && dt != at::ScalarType::Undefined ? dt : at::kFloat);
    std::vector<at::Tensor> g;
    for (auto& p : m->parameters()) g.push_back(p.grad().clone());
    return g;
  };
  int64_t ref_bytes = 0;
  auto ref = grads(at::ScalarType::Undefined, &ref_bytes);
  for (auto [dt, eps] : {std::pair{at::kBFloat16, 1.0 / 128}, std::pair{at::kHalf, 1.0 / 1024}}) {
    int64_t bytes = 0;
    auto got = grads(dt, &bytes);
    for (size_t i = 0; i < ref.size(); ++i) {
      double scale = ref[i].abs().max().item<double>() + 1e-12;
      // each of up to 3 combines and the final cast round by at most half an ulp (eps / 2)
      EXPECT_LE((got[i] - ref[i]).abs().max().item<double>(), 2 * eps * scale) << c10::toString(dt) << " param " << i;
      at::Tensor root = got[i].clone();
      cpu_comm().broadcast(root, 0, "test.bits")->wait();
      EXPECT_TRUE(at::equal(root, got[i])) << "ranks differ, param " << i;
    }
    if (n > 1) EXPECT_EQ(bytes * 2, ref_bytes) << c10::toString(dt);
    if (n > 1) EXPECT_GT(bytes, 0);
  }
}

}  // namespace
