#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "runtime/check.h"
#include "train/config.h"
#include "unit/train/temp_toml.h"

using namespace hpctrain;

namespace {
std::string error_of(const std::string& toml, std::map<std::string, std::string> flags) {
  try {
    load_config(toml, flags);
  } catch (const CollectiveError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Config, FlagsOverrideTheFile) {
  auto path = write_toml("model = \"mlp\"\nbatch_size = 32\nlr = 0.1\ndata = \"/d\"\nsync_bn = true\n");
  auto c = load_config(path, {{"batch_size", "16"}, {"amp", "bf16"}});
  EXPECT_EQ(c.model, "mlp");
  EXPECT_EQ(c.batch_size, 16);
  EXPECT_DOUBLE_EQ(c.lr, 0.1);
  EXPECT_TRUE(c.sync_bn);
  EXPECT_EQ(c.amp, "bf16");
  auto j = c.to_json();
  EXPECT_EQ(j["batch_size"], 16);
  EXPECT_EQ(TrainConfig::from_json(j).to_json(), j);
}

TEST(Config, UnknownKeyNamesTheKeyAndTheKnownOnes) {
  auto msg = error_of(write_toml("data = \"/d\"\nbatchsize = 3\n"), {});
  EXPECT_NE(msg.find("batchsize is not a known key"), std::string::npos) << msg;
  EXPECT_NE(msg.find("batch_size"), std::string::npos) << msg;
}

TEST(Config, WrongTypeNamesTheKey) {
  auto msg = error_of(write_toml("data = \"/d\"\nbatch_size = \"big\"\n"), {});
  EXPECT_NE(msg.find("batch_size must be an integer"), std::string::npos) << msg;
  msg = error_of("", {{"data", "/d"}, {"lr", "fast"}});
  EXPECT_NE(msg.find("--lr expects a number"), std::string::npos) << msg;
}

TEST(Config, OutOfRangeValuesAreRejected) {
  for (auto [key, val, word] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"batch_size", "0", "--batch-size"},
           {"batch_size", "-4", "--batch-size"},
           {"lr", "0", "--lr"},
           {"lr", "-1", "--lr"},
           {"epochs", "0", "--epochs"},
           {"bucket_mb", "0", "--bucket-mb"},
           {"grad_accum", "0", "--grad-accum"},
           {"straggler_threshold", "-0.1", "--straggler-threshold"},
           {"straggler_threshold", "1.5", "--straggler-threshold"}}) {
    auto msg = error_of("", {{"data", "/d"}, {key, val}});
    EXPECT_NE(msg.find(word), std::string::npos) << msg;
    EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
  }
}

TEST(Config, StragglerThresholdDefaultsTo5PercentAndZeroTurnsItOff) {
  EXPECT_DOUBLE_EQ(load_config("", {{"data", "/d"}}).straggler_threshold, 0.05);
  EXPECT_DOUBLE_EQ(load_config("", {{"data", "/d"}, {"straggler_threshold", "0"}}).straggler_threshold, 0.0);
}

TEST(Config, ChoicesListTheAllowedValues) {
  auto msg = error_of("", {{"data", "/d"}, {"optimizer", "lamb"}});
  EXPECT_NE(msg.find("allowed: sgd|adamw"), std::string::npos) << msg;
  msg = error_of("", {{"data", "/d"}, {"loss", "hinge"}});
  EXPECT_NE(msg.find("allowed: cross_entropy|mse|l1|smooth_l1"), std::string::npos) << msg;
}

TEST(Config, ModelLibIsAListFromFlagsAndToml) {
  auto c = load_config("", {{"data", "/d"}, {"model_lib", "a.so,b/c.so"}});
  EXPECT_EQ(c.model_lib, (std::vector<std::string>{"a.so", "b/c.so"}));
  c = load_config(write_toml("model_lib = [\"x.so\", \"y.so\"]\ndata = \"/d\"\n"), {});
  EXPECT_EQ(c.model_lib, (std::vector<std::string>{"x.so", "y.so"}));
  c = load_config(write_toml("model_lib = \"z.so\"\ndata = \"/d\"\n"), {});
  EXPECT_EQ(c.model_lib, (std::vector<std::string>{"z.so"}));
  EXPECT_NE(error_of(write_toml("model_lib = [1]\ndata = \"/d\"\n"), {}).find("array of strings"), std::string::npos);
}

TEST(Config, MissingOrUnparsableFile) {
  EXPECT_NE(error_of("/nonexistent/x.toml", {}).find("does not exist"), std::string::npos);
  auto msg = error_of(write_toml("model = = \n"), {});
  EXPECT_NE(msg.find("not valid TOML"), std::string::npos) << msg;
}

TEST(Config, DataIsRequiredAndGradAccumMustDivideTheBatch) {
  EXPECT_NE(error_of("", {}).find("--data"), std::string::npos);
  auto msg = error_of("", {{"data", "/d"}, {"batch_size", "10"}, {"grad_accum", "3"}});
  EXPECT_NE(msg.find("not divisible"), std::string::npos) << msg;
}
