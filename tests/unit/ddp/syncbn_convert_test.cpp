// convert_sync_batchnorm on a nested model: every name and tensor is kept, containers' forward
// really goes through SyncBatchNorm, custom parents are refused; make_batch_norm.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <map>

#include "runtime/check.h"
#include "support/mirror_comm.h"
#include "support/syncbn_test_util.h"

using namespace hpctrain;
using hpctrain::testing::MirrorComm;
namespace nn = torch::nn;

namespace {

struct NetImpl : nn::Module {
  // (LibTorch cannot nest a Sequential directly in a Sequential: its forward is a template.)
  nn::Sequential features{nn::Conv2d(nn::Conv2dOptions(1, 4, 3).padding(1)), nn::BatchNorm2d(4), nn::ReLU(),
                          nn::BatchNorm2d(4)};
  nn::ModuleList heads{nn::Linear(4, 6), nn::BatchNorm1d(6), nn::Sequential(nn::BatchNorm1d(6))};
  nn::ModuleDict extra{nullptr};
  NetImpl() {
    register_module("features", features);
    register_module("heads", heads);
    extra = register_module("extra", nn::ModuleDict());
    extra->update(std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>>{
        {"bn3d", nn::BatchNorm3d(nn::BatchNorm3dOptions(2).momentum(std::nullopt)).ptr()}});
  }
};
TORCH_MODULE(Net);

// A custom module calling its typed member: replacing in the registry would be silently wrong.
struct TypedMemberImpl : nn::Module {
  nn::BatchNorm2d bn{nullptr};
  TypedMemberImpl() { bn = register_module("bn", nn::BatchNorm2d(3)); }
};
TORCH_MODULE(TypedMember);

std::map<std::string, at::Tensor> state_of(const nn::Module& m) {
  std::map<std::string, at::Tensor> s;
  for (const auto& p : m.named_parameters()) s[p.key()] = p.value();
  for (const auto& b : m.named_buffers()) s["buf:" + b.key()] = b.value();
  return s;
}

TEST(ConvertSyncBn, NestedModelKeepsNamesTensorsAndValues) {
  at::manual_seed(5);
  Net net;
  {  // non-default state everywhere, so "kept" means something
    at::NoGradGuard g;
    for (auto& p : net->named_parameters()) p.value().copy_(at::randn_like(p.value()));
    for (auto& b : net->named_buffers())
      if (b.value().is_floating_point())
        b.value().copy_(at::rand_like(b.value()) + 0.5);
      else
        b.value().fill_(4);
  }
  net->eval();
  auto before = state_of(*net);
  std::vector<std::string> keys_before = net->named_parameters().keys();
  std::map<std::string, at::Tensor> values;
  for (auto& [k, t] : before) values[k] = t.clone();

  MirrorComm comm(2);
  std::vector<std::string> replaced;
  auto root = convert_sync_batchnorm(net.ptr(), &comm, &replaced);
  EXPECT_EQ(root.get(), net.ptr().get());
  EXPECT_EQ(replaced, (std::vector<std::string>{"features.1", "features.3", "heads.1", "heads.2.0", "extra.bn3d"}));

  auto after = state_of(*net);
  ASSERT_EQ(after.size(), before.size());
  EXPECT_EQ(net->named_parameters().keys(), keys_before);
  for (auto& [k, t] : before) {
    ASSERT_TRUE(after.count(k)) << k;
    EXPECT_TRUE(after[k].is_same(t)) << k << " is not the same tensor";
    EXPECT_TRUE(at::equal(after[k], values[k])) << k;
  }
  for (const auto& name : replaced) {
    auto m = net->named_modules()[name];
    auto s = std::dynamic_pointer_cast<SyncBatchNormImpl>(m);
    ASSERT_TRUE(s) << name;
    EXPECT_EQ(s->name_for_tags(), name);
    EXPECT_FALSE(s->is_training()) << "training mode must be kept";
  }
  auto bn3d = std::dynamic_pointer_cast<SyncBatchNormImpl>(net->extra["bn3d"]);
  ASSERT_TRUE(bn3d);
  EXPECT_FALSE(bn3d->options.momentum().has_value());
  EXPECT_TRUE(std::dynamic_pointer_cast<SyncBatchNormImpl>(net->heads->ptr(1)));

  // Sequential's forward (its AnyModule list) now calls the SyncBatchNorms: the collective
  // tags show up, one per layer, in order.
  net->train();
  at::Tensor y = net->features->forward(at::randn({2, 1, 5, 5}));
  EXPECT_EQ(comm.tags, (std::vector<std::string>{"syncbn.features.1", "syncbn.features.3"}));
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 4, 5, 5}));
  net->heads[2]->as<nn::Sequential>()->forward(at::randn({3, 6}));
  EXPECT_EQ(comm.tags.back(), "syncbn.heads.2.0");
}

TEST(ConvertSyncBn, RootBatchNormIsReplacedAndReturned) {
  nn::BatchNorm1d bn(nn::BatchNorm1dOptions(3).affine(false));
  MirrorComm comm(2);
  auto root = convert_sync_batchnorm(bn.ptr(), &comm);
  auto s = std::dynamic_pointer_cast<SyncBatchNormImpl>(root);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->running_mean.is_same(bn->running_mean));
  EXPECT_FALSE(s->weight.defined());
  EXPECT_EQ(s->named_parameters().size(), 0u);
}

TEST(ConvertSyncBn, CustomParentWithTypedMemberIsRefused) {
  TypedMember m;
  nn::ModuleList outer(m);
  MirrorComm comm(2);
  try {
    convert_sync_batchnorm(outer.ptr(), &comm);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'0.bn'"), std::string::npos) << e.what();
  }
}

TEST(MakeBatchNorm, BuildsBatchNormOrSyncBatchNorm) {
  MirrorComm comm(2);
  auto a = make_batch_norm(2, nn::BatchNormOptions(4), nullptr, "bn1");
  auto b = make_batch_norm(2, nn::BatchNormOptions(4), &comm, "bn1");
  EXPECT_TRUE(std::dynamic_pointer_cast<nn::BatchNorm2dImpl>(a.ptr()));
  auto s = std::dynamic_pointer_cast<SyncBatchNormImpl>(b.ptr());
  ASSERT_TRUE(s);
  EXPECT_EQ(s->communicator(), &comm);
  EXPECT_EQ(a.ptr()->named_buffers().keys(), b.ptr()->named_buffers().keys());
  at::Tensor x = at::randn({3, 4, 2, 2});
  EXPECT_EQ(b.forward(x).sizes(), x.sizes());
  EXPECT_EQ(comm.tags, std::vector<std::string>{"syncbn.bn1"});
  EXPECT_TRUE(
      std::dynamic_pointer_cast<nn::BatchNorm1dImpl>(make_batch_norm(1, nn::BatchNormOptions(4), nullptr, "x").ptr()));
  EXPECT_THROW(make_batch_norm(4, nn::BatchNormOptions(4), nullptr, "x"), Error);
}

}  // namespace
