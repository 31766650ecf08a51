#include <gtest/gtest.h>

#include <torch/nn/modules/linear.h>

#include "model/model_registry.h"
#include "runtime/check.h"
#include "support/error_of.h"

using namespace hpctrain;

using hpctrain::testing::error_of;

TEST(ModelRegistry, TheZooIsRegisteredBehindTheModelInterface) {
  std::vector<std::string> zoo;
  for (const auto& e : registered_models())
    if (e.origin == "zoo") zoo.push_back(e.name);
  EXPECT_EQ(zoo, (std::vector<std::string>{"mlp", "cnn", "resnet", "gpt"}));
  ModelSpec spec;
  spec.name = "cnn";
  spec.sample_shape = {1, 28, 28};
  spec.num_classes = 10;
  ModelPtr m = resolve_model("cnn", {}).factory(spec);
  EXPECT_EQ(count_parameters(*m), 824650);
  auto params = m->named_parameters();
  EXPECT_EQ(params.front().first, "features.0.weight");  // the module's own names, no prefix
  EXPECT_EQ(params.back().first, "classifier.2.bias");
  std::vector<std::string> buffers;
  for (auto& [name, b] : m->named_buffers()) buffers.push_back(name);
  EXPECT_EQ(buffers.front(), "features.1.running_mean");
  EXPECT_EQ(m->forward(at::zeros({3, 1, 28, 28})).sizes(), (std::vector<int64_t>{3, 10}));
  m->train(false);
  EXPECT_FALSE(m->is_training());
}

TEST(ModelRegistry, UnknownNamesAndBadLibrariesAreOneLine) {
  auto msg = error_of([] { resolve_model("vgg", {}); });
  EXPECT_NE(msg.find("unknown model \"vgg\" (zoo: mlp, cnn, resnet"), std::string::npos) << msg;
  msg = error_of([] { load_model_library("/nonexistent/libx.so"); });
  EXPECT_EQ(msg, "--model-lib /nonexistent/libx.so: does not exist");
  msg = error_of([] { load_model_library("/tmp"); });
  EXPECT_NE(msg.find("is a directory"), std::string::npos) << msg;
}

TEST(ModelRegistry, ModuleModelExposesTheModulesOwnTensors) {
  auto lin = torch::nn::Linear(4, 2);
  ModelPtr m = module_model(lin);
  auto p = m->named_parameters();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].first, "weight");
  EXPECT_TRUE(p[0].second.is_same(lin->weight));  // the very tensor, not a copy
  EXPECT_EQ(m->module().get(), lin.ptr().get());
}
