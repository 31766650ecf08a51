// EventFileWriter and TensorBoardSink: file naming, framing, the Event contents TensorBoard
// reads, the record -> scalar mapping, set-up errors. (The real TensorBoard reader reads our
// files in tests/e2e/test_tensorboard.sh.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "event_reader.h"
#include "metrics/event_file.h"
#include "metrics/tensorboard_sink.h"
#include "runtime/check.h"

namespace hpctrain {
namespace {

namespace fs = std::filesystem;
using testing::read_events;

class TbDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hpctrain-tb-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<std::string> files() const {
    std::vector<std::string> v;
    for (auto& e : fs::directory_iterator(dir_)) v.push_back(e.path().string());
    std::sort(v.begin(), v.end());
    return v;
  }
  std::string dir_;
};

TEST_F(TbDir, NewFileNamedByTimeAndHostStartsWithFileVersion) {
  std::string sub = dir_ + "/a/b";  // parents are created
  EventFileWriter w(sub);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string name = fs::path(w.path()).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  EXPECT_NE(name.find(std::string(".") + host), std::string::npos) << name;
  auto ev = read_events(w.path());
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].file_version(), "brain.Event:2");
  EXPECT_GT(ev[0].wall_time(), 1.7e9);
}

TEST_F(TbDir, SecondWriterInTheSameDirNeverTouchesTheFirstFile) {
  EventFileWriter a(dir_);
  a.scalars(1, {{"x", 1.0}});
  ASSERT_TRUE(a.flush());
  EventFileWriter b(dir_);  // same second, same host: gets a suffix
  EXPECT_NE(a.path(), b.path());
  EXPECT_EQ(files().size(), 2u);
  EXPECT_EQ(read_events(a.path()).size(), 2u);
}

TEST_F(TbDir, ScalarsTextAndSessionStartAsTensorBoardReadsThem) {
  EventFileWriter w(dir_);
  w.session_start(101);
  w.scalars(150, {{"train/loss", 0.25}, {"train/lr", 0.1}});
  w.text(100, "config", "| key | value |");
  ASSERT_TRUE(w.flush());
  auto ev = read_events(w.path());
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[1].step(), 101);
  EXPECT_EQ(ev[1].session_log().status(), tb::SessionLog::START);
  ASSERT_EQ(ev[2].summary().value_size(), 2);
  EXPECT_EQ(ev[2].step(), 150);
  EXPECT_EQ(ev[2].summary().value(0).tag(), "train/loss");
  EXPECT_FLOAT_EQ(ev[2].summary().value(0).simple_value(), 0.25f);
  EXPECT_FLOAT_EQ(ev[2].summary().value(1).simple_value(), 0.1f);
  const auto& t = ev[3].summary().value(0);
  EXPECT_EQ(t.tag(), "config");
  EXPECT_EQ(t.metadata().plugin_data().plugin_name(), "text");
  EXPECT_EQ(t.tensor().dtype(), tb::DT_STRING);
  ASSERT_EQ(t.tensor().string_val_size(), 1);
  EXPECT_EQ(t.tensor().string_val(0), "| key | value |");
}

TEST_F(TbDir, UncreatableDirectoryIsAnErrorNamingIt) {
  std::string file = dir_ + "/plain-file";
  std::ofstream(file) << "x";
  try {
    EventFileWriter w(file + "/tb");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(file + "/tb"), std::string::npos) << e.what();
  }
  EXPECT_THROW(TensorBoardSink(file, 0), Error);  // a file, not a directory
}

TEST(TensorBoardScalars, EveryNumericFieldOfTrainEvalCheckpoint) {
  nlohmann::json train = {{"type", "train"},
                          {"step", 50},
                          {"epoch", 0},
                          {"loss", 0.5},
                          {"lr", 0.01},
                          {"loss_scale", 65536.0},
                          {"flag", true},
                          {"name", "x"},
                          {"straggler", {{"rank", 1}, {"cause", "data"}}},
                          {"per_rank", {{{"step_s", 0.1}}, {{"step_s", 0.2}, {"data_wait_s", 0.05}}}}};
  auto s = tensorboard_scalars(train);
  std::map<std::string, double> m(s.begin(), s.end());
  EXPECT_EQ(m.size(), s.size());
  std::map<std::string, double> want = {
      {"train/loss", 0.5},    {"train/lr", 0.01},     {"train/loss_scale", 65536.0}, {"train/straggler/rank", 1},
      {"rank/0/step_s", 0.1}, {"rank/1/step_s", 0.2}, {"rank/1/data_wait_s", 0.05}};
  EXPECT_EQ(m, want);
  auto e = tensorboard_scalars({{"type", "eval"}, {"step", 9}, {"test_loss", 0.3}, {"test_accuracy", 0.9}});
  EXPECT_EQ(e.size(), 2u);
  auto c = tensorboard_scalars({{"type", "checkpoint"}, {"step", 9}, {"stall_ms", 3.0}, {"async", true}});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].first, "checkpoint/stall_ms");
  EXPECT_TRUE(tensorboard_scalars({{"type", "summary"}, {"steps", 9}}).empty());
}

TEST_F(TbDir, SinkWritesConfigScalarsAndSummaryAtTheirSteps) {
  std::string path;
  {
    TensorBoardSink sink(dir_, 200);  // a run resumed at step 200
    path = sink.path();
    sink.record({{"type", "config"}, {"config", {{"model", "cnn"}, {"lr", 0.05}}}});
    sink.record({{"type", "train"}, {"step", 250}, {"loss", 1.5}});
    EXPECT_EQ(read_events(path).size(), 4u) << "every record is flushed";
    sink.record({{"type", "eval"}, {"step", 300}, {"test_accuracy", 0.75}});
    sink.record({{"type", "summary"}, {"summary", {{"steps", 300}}}});
    EXPECT_TRUE(sink.active());
  }
  auto ev = read_events(path);
  ASSERT_EQ(ev.size(), 6u);
  EXPECT_EQ(ev[1].session_log().status(), tb::SessionLog::START);
  EXPECT_EQ(ev[1].step(), 201);
  EXPECT_EQ(ev[2].step(), 200);
  EXPECT_EQ(ev[2].summary().value(0).tag(), "config");
  EXPECT_NE(ev[2].summary().value(0).tensor().string_val(0).find("| model | cnn |"), std::string::npos);
  EXPECT_EQ(ev[3].step(), 250);
  EXPECT_EQ(ev[3].summary().value(0).tag(), "train/loss");
  EXPECT_EQ(ev[4].summary().value(0).tag(), "eval/test_accuracy");
  EXPECT_EQ(ev[5].step(), 300);
  EXPECT_EQ(ev[5].summary().value(0).tag(), "summary");
}

}  // namespace
}  // namespace hpctrain
