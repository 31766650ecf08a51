// SyncBatchNorm in one process: a world of 1 equals torch::nn::BatchNorm bit for bit; the
// collective path (driven by a fake k-rank communicator) equals BatchNorm on k copies of the
// batch; the autograd Function matches torch's gradients in fp64; state names, checkpoints and
// error paths.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <sstream>

#include "ddp/sync_bn_function.h"
#include "runtime/check.h"
#include "support/mirror_comm.h"
#include "support/syncbn_test_util.h"
#include "support/test_world.h"

using namespace hpctrain;
using hpctrain::testing::cpu_comm;
using hpctrain::testing::max_rel_diff;
using hpctrain::testing::MirrorComm;
using hpctrain::testing::ReferenceBN;

namespace {

struct Opt {
  int64_t dim;  // input rank, 2..5
  bool affine;
  std::optional<double> momentum;
};

std::vector<int64_t> shape_for(int64_t dim, int64_t n, int64_t C) {
  std::vector<int64_t> s{n, C};
  for (int64_t d = 2; d < dim; ++d) s.push_back(3 + d);
  return s;
}

class WorldOfOne : public ::testing::TestWithParam<Opt> {};

// comm == null and a 1-rank communicator both take torch's kernel: results are identical.
TEST_P(WorldOfOne, EqualsBatchNormExactly) {
  const Opt o = GetParam();
  const int64_t C = 3;
  auto opts = torch::nn::BatchNormOptions(C).affine(o.affine).momentum(o.momentum);
  for (Communicator* comm : {static_cast<Communicator*>(nullptr), &cpu_comm()}) {
    at::manual_seed(7);
    ReferenceBN ref(o.dim, opts);
    SyncBatchNorm sbn(opts, comm, "one");
    hpctrain::testing::randomize_affine(ref, *sbn);
    for (int step = 0; step < 3; ++step) {
      at::Tensor x = at::randn(shape_for(o.dim, 4, C)) * 2 + 1, dy = at::randn_like(x);
      at::Tensor xa = x.clone().requires_grad_(), xb = x.clone().requires_grad_();
      at::Tensor ya = sbn->forward(xa), yb = ref.forward(xb);
      (ya * dy).sum().backward();
      (yb * dy).sum().backward();
      EXPECT_TRUE(at::equal(ya, yb));
      EXPECT_TRUE(at::equal(xa.grad(), xb.grad()));
      if (o.affine) {
        EXPECT_TRUE(at::equal(sbn->weight.grad(), ref.param("weight").grad()));
        EXPECT_TRUE(at::equal(sbn->bias.grad(), ref.param("bias").grad()));
      }
      EXPECT_TRUE(at::equal(sbn->running_mean, ref.buffer("running_mean")));
      EXPECT_TRUE(at::equal(sbn->running_var, ref.buffer("running_var")));
      EXPECT_TRUE(at::equal(sbn->num_batches_tracked, ref.buffer("num_batches_tracked")));
    }
    sbn->eval();
    ref.module->eval();
    at::Tensor x = at::randn(shape_for(o.dim, 5, C));
    EXPECT_TRUE(at::equal(sbn->forward(x), ref.forward(x)));
    EXPECT_EQ(sbn->synced_forwards(), 0);
  }
}

class MirrorOfThree : public ::testing::TestWithParam<Opt> {};

// A fake 3-rank world whose ranks all hold the same batch: the global batch is 3 copies.
TEST_P(MirrorOfThree, CollectivePathEqualsBatchNormOnCopies) {
  const Opt o = GetParam();
  const int64_t C = 4, k = 3;
  auto opts = torch::nn::BatchNormOptions(C).affine(o.affine).momentum(o.momentum);
  at::manual_seed(11);
  MirrorComm comm(k);
  ReferenceBN ref(o.dim, opts);
  SyncBatchNorm sbn(opts, &comm, "m");
  hpctrain::testing::randomize_affine(ref, *sbn);
  for (int step = 0; step < 3; ++step) {
    // 5 rows: with 2, xhat is +-1 and the input gradient is exactly 0 (only noise to compare).
    at::Tensor x = at::randn(shape_for(o.dim, 5, C)) * 3 + 5, dy = at::randn_like(x);
    at::Tensor xa = x.clone().requires_grad_(), xb = at::cat({x, x, x}).requires_grad_();
    at::Tensor ya = sbn->forward(xa), yb = ref.forward(xb);
    (ya * dy).sum().backward();
    (yb * at::cat({dy, dy, dy})).sum().backward();
    EXPECT_LE(max_rel_diff(ya, yb.narrow(0, 0, 5)), 1e-5);
    EXPECT_LE(max_rel_diff(xa.grad(), xb.grad().narrow(0, 0, 5)), 1e-5);
    if (o.affine) {  // local grads; the k ranks' sum is the reference's
      EXPECT_LE(max_rel_diff(sbn->weight.grad() * k, ref.param("weight").grad()), 1e-5);
      EXPECT_LE(max_rel_diff(sbn->bias.grad() * k, ref.param("bias").grad()), 1e-5);
    }
    EXPECT_LE(max_rel_diff(sbn->running_mean, ref.buffer("running_mean")), 1e-5);
    EXPECT_LE(max_rel_diff(sbn->running_var, ref.buffer("running_var")), 1e-5);
    EXPECT_TRUE(at::equal(sbn->num_batches_tracked, ref.buffer("num_batches_tracked")));
  }
  EXPECT_EQ(sbn->synced_forwards(), 3);
  ASSERT_EQ(comm.tags.size(), 6u);  // exactly one collective per forward and per backward
  EXPECT_EQ(comm.tags[0], "syncbn.m");
  EXPECT_EQ(comm.tags[1], "syncbn.m.backward");
  sbn->eval();  // eval never communicates
  sbn->forward(at::randn(shape_for(o.dim, 2, C)));
  EXPECT_EQ(comm.tags.size(), 6u);
}

const auto kOpts = ::testing::Values(Opt{2, true, 0.1}, Opt{2, false, 0.1}, Opt{3, true, std::nullopt},
                                     Opt{4, true, 0.1}, Opt{4, false, std::nullopt}, Opt{5, true, 0.2});
INSTANTIATE_TEST_SUITE_P(Shapes, WorldOfOne, kOpts);
INSTANTIATE_TEST_SUITE_P(Shapes, MirrorOfThree, kOpts);

// The Function's own math (world of 1, called directly) against torch's autograd, in fp64.
TEST(SyncBnFunction, GradientsMatchTorchInDouble) {
  at::manual_seed(3);
  at::Tensor x = at::randn({5, 3, 4}, at::kDouble), dy = at::randn_like(x);
  at::Tensor w = at::rand({3}, at::kDouble) + 0.5, b = at::randn({3}, at::kDouble);
  at::Tensor xa = x.clone().requires_grad_(), wa = w.clone().requires_grad_(), ba = b.clone().requires_grad_();
  at::Tensor xb = x.clone().requires_grad_(), wb = w.clone().requires_grad_(), bb = b.clone().requires_grad_();
  SyncBnStats stats;
  at::Tensor ya = sync_batch_norm_train(xa, wa, ba, 1e-5, 3, cpu_comm(), "f", &stats);
  at::Tensor yb = at::batch_norm(xb, wb, bb, {}, {}, true, 0.1, 1e-5, false);
  (ya * dy).sum().backward();
  (yb * dy).sum().backward();
  EXPECT_LE(max_rel_diff(ya, yb), 1e-12);
  EXPECT_LE(max_rel_diff(xa.grad(), xb.grad()), 1e-12);
  EXPECT_LE(max_rel_diff(wa.grad(), wb.grad()), 1e-12);
  EXPECT_LE(max_rel_diff(ba.grad(), bb.grad()), 1e-12);
  EXPECT_EQ(stats.count, 20);
  EXPECT_LE(max_rel_diff(stats.var, (x - x.mean({0, 2}, true)).pow(2).mean({0, 2})), 1e-12);
}

// fp32 activations with |mean| >> std over 3 mirrored ranks: the per-rank statistics and the
// cross-rank combine must not cancel (E[x^2] - E[x]^2 in fp32 would lose every digit here).
TEST(SyncBnFunction, LargeMeanStatisticsStayAccurateAcrossRanks) {
  at::manual_seed(5);
  at::Tensor x = at::randn({8, 4, 6, 6}) + 1e4;
  MirrorComm comm(3);
  SyncBnStats stats;
  at::Tensor y = sync_batch_norm_train(x, at::ones({4}), at::zeros({4}), 1e-5, 4, comm, "big", &stats);
  at::Tensor xd = x.to(at::kDouble);
  at::Tensor var = (xd - xd.mean({0, 2, 3}, true)).pow(2).mean({0, 2, 3});
  EXPECT_EQ(stats.count, 3 * 8 * 36);
  EXPECT_LE(max_rel_diff(stats.var, var), 1e-3);
  EXPECT_LE(max_rel_diff(stats.mean, xd.mean({0, 2, 3})), 1e-6);
  at::Tensor ref = (xd - xd.mean({0, 2, 3}, true)) / (var.view({1, 4, 1, 1}) + 1e-5).sqrt();
  EXPECT_LE((y.to(at::kDouble) - ref).abs().max().item<double>(), 2e-3);
}

// Same names, shapes and order as BatchNorm; checkpoints load across both ways.
TEST(SyncBnState, NamesShapesAndCheckpointsInterchangeWithBatchNorm) {
  for (bool affine : {true, false}) {
    for (bool track : {true, false}) {
      auto opts = torch::nn::BatchNormOptions(5).affine(affine).track_running_stats(track);
      ReferenceBN ref(4, opts);
      SyncBatchNorm sbn(opts, nullptr, "s");
      auto pa = sbn->named_parameters(), pb = ref.module->named_parameters();
      auto ba = sbn->named_buffers(), bb = ref.module->named_buffers();
      ASSERT_EQ(pa.keys(), pb.keys());
      ASSERT_EQ(ba.keys(), bb.keys());
      for (const auto& it : pa) EXPECT_EQ(it.value().sizes(), pb[it.key()].sizes()) << it.key();
      for (const auto& it : ba) EXPECT_EQ(it.value().sizes(), bb[it.key()].sizes()) << it.key();
    }
  }
  // BatchNorm -> SyncBatchNorm and back through torch's archive format.
  auto opts = torch::nn::BatchNormOptions(5);
  ReferenceBN ref(4, opts);
  {
    at::NoGradGuard g;
    for (auto& p : ref.module->named_parameters()) p.value().copy_(at::randn({5}));
    ref.buffer("running_mean").copy_(at::randn({5}));
    ref.buffer("running_var").copy_(at::rand({5}));
    ref.buffer("num_batches_tracked").fill_(17);
  }
  std::stringstream s1;
  torch::serialize::OutputArchive out1;
  ref.module->save(out1);
  out1.save_to(s1);
  SyncBatchNorm sbn(opts, nullptr, "s");
  torch::serialize::InputArchive in1;
  in1.load_from(s1);
  sbn->load(in1);
  for (const char* n : {"weight", "bias"}) EXPECT_TRUE(at::equal(sbn->named_parameters()[n], ref.param(n)));
  for (const char* n : {"running_mean", "running_var", "num_batches_tracked"})
    EXPECT_TRUE(at::equal(sbn->named_buffers()[n], ref.buffer(n))) << n;

  std::stringstream s2;
  torch::serialize::OutputArchive out2;
  sbn->save(out2);
  out2.save_to(s2);
  ReferenceBN back(4, opts);
  torch::serialize::InputArchive in2;
  in2.load_from(s2);
  back.module->load(in2);
  for (const char* n : {"running_mean", "running_var", "num_batches_tracked"})
    EXPECT_TRUE(at::equal(back.buffer(n), ref.buffer(n))) << n;
  EXPECT_TRUE(at::equal(back.param("weight"), ref.param("weight")));
}

TEST(SyncBnErrors, InvalidInputsNameTheCause) {
  SyncBatchNorm local(torch::nn::BatchNormOptions(3), nullptr, "loc");
  EXPECT_THROW(local->forward(at::randn({4})), Error);
  EXPECT_THROW(local->forward(at::randn({4, 5, 2})), Error);
  EXPECT_THROW(local->forward(at::ones({4, 3}, at::kLong)), Error);

  MirrorComm comm(2);  // the collective path: joins, then raises naming this rank
  SyncBatchNorm sync(torch::nn::BatchNormOptions(3), &comm, "net.bn");
  try {
    sync->forward(at::randn({4, 5}));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("syncbn.net.bn: rank 0: expected 3 channels"), std::string::npos) << msg;
  }
  EXPECT_EQ(comm.tags.size(), 1u);
  EXPECT_THROW(sync->forward(at::randn({0, 3})), Error);  // no values at all
}

}  // namespace
