// A converted model really normalizes over the global batch: with 2+ ranks its output equals
// single-process BatchNorm on the concatenated batch and differs from local BatchNorm.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include "support/syncbn_test_util.h"
#include "support/test_world.h"

using namespace hpctrain;
using hpctrain::testing::max_rel_diff;
using hpctrain::testing::world;
namespace nn = torch::nn;

TEST(ConvertSyncBnMpi, ConvertedSequentialNormalizesOverTheGlobalBatch) {
  const int64_t per_rank = 6, W = world().size(), r = world().rank();
  auto build = [] {
    at::manual_seed(21);  // same weights on every rank and in the reference
    return nn::Sequential(nn::Linear(5, 4), nn::BatchNorm1d(4));
  };
  nn::Sequential model = build(), local = build(), single = build();
  at::manual_seed(22);
  // Rank-dependent offsets so local and global statistics differ.
  at::Tensor xg = at::randn({per_rank * W, 5}) + at::arange(W).repeat_interleave(per_rank).unsqueeze(1).to(at::kFloat);
  at::Tensor x = xg.narrow(0, r * per_rank, per_rank);

  std::vector<std::string> replaced;
  auto root = convert_sync_batchnorm(model.ptr(), &hpctrain::testing::cpu_comm(), &replaced);
  ASSERT_EQ(replaced, std::vector<std::string>{"1"});
  at::Tensor y = model->forward(x);
  at::Tensor want = single->forward(xg).narrow(0, r * per_rank, per_rank);
  EXPECT_LE(max_rel_diff(y, want), 1e-5);
  if (W > 1) EXPECT_GT(max_rel_diff(local->forward(x), want), 1e-2) << "local BN should differ";
}
