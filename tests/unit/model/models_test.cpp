#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "model/models.h"
#include "runtime/check.h"

using namespace hpctrain;

TEST(Models, CnnIsExactlyTheDesignNetwork) {
  auto m = make_model("cnn", {1, 28, 28}, 10);
  EXPECT_EQ(count_parameters(*m), 824650);
  std::vector<std::string> names;
  for (auto& p : m->named_parameters()) names.push_back(p.key());
  std::vector<std::string> want = {"features.0.weight", "features.0.bias",     "features.1.weight",
                                   "features.1.bias",   "features.4.weight",   "features.4.bias",
                                   "features.5.weight", "features.5.bias",     "classifier.0.weight",
                                   "classifier.0.bias", "classifier.2.weight", "classifier.2.bias"};
  EXPECT_EQ(names, want);
  auto buffers = m->named_buffers();
  EXPECT_TRUE(buffers.contains("features.1.running_mean"));
  EXPECT_TRUE(buffers.contains("features.5.num_batches_tracked"));
  EXPECT_EQ(m->forward(at::randn({3, 1, 28, 28})).sizes(), (std::vector<int64_t>{3, 10}));
}

TEST(Models, MlpAndResnetShapes) {
  auto mlp = make_model("mlp", {1, 28, 28}, 10);
  EXPECT_EQ(count_parameters(*mlp), 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10);
  EXPECT_EQ(mlp->forward(at::randn({2, 1, 28, 28})).sizes(), (std::vector<int64_t>{2, 10}));
  auto res = make_model("resnet", {3, 32, 32}, 7);
  EXPECT_EQ(res->forward(at::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 7}));
  EXPECT_TRUE(res->named_buffers().contains("features.1.bn1.running_var"));
  auto res28 = make_model("resnet", {1, 28, 28}, 10);
  EXPECT_EQ(count_parameters(*res28), 690394);  // the count models.h states
  EXPECT_EQ(res28->forward(at::randn({2, 1, 28, 28})).sizes(), (std::vector<int64_t>{2, 10}));
}

TEST(Models, UnknownNameAndBadShapesAreErrors) {
  EXPECT_THROW(make_model("vgg", {1, 28, 28}, 10), CollectiveError);
  EXPECT_THROW(make_model("cnn", {28, 28}, 10), CollectiveError);
  EXPECT_THROW(make_model("cnn", {1, 28, 28}, 0), CollectiveError);
  EXPECT_EQ(count_parameters(*make_model("mlp", {784}, 1)), 784 * 512 + 512 + 512 * 256 + 256 + 256 + 1);  // any shape
}
