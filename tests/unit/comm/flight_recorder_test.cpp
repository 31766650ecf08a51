// FlightRecorder: records follow enqueue/start/end by lane and sequence number, the ring keeps
// the newest N, a dump is one JSON file written atomically, and capacity 0 records nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "comm/flight_recorder.h"

using hpctrain::FlightRecorder;
using hpctrain::OpInfo;

namespace {
OpInfo op(uint64_t seq, int64_t numel = 10) {
  OpInfo i;
  i.op = "allreduce";
  i.dtype = "float32";
  i.numel = numel;
  i.seq = seq;
  i.tag = "ddp.bucket[0]";
  return i;
}
}  // namespace

TEST(FlightRecorder, RingStatesAndDump) {
  char tmpl[] = "/tmp/hpctrain-flight-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  FlightRecorder& f = FlightRecorder::get();
  f.configure(3, dir, 1, 4, "job-a");
  for (uint64_t s = 1; s <= 5; ++s) f.enqueue("cpu", op(s));
  for (uint64_t s = 1; s <= 4; ++s) f.start("cpu", s);
  for (uint64_t s = 1; s <= 3; ++s) f.end("cpu", s, s != 2);
  auto recs = f.snapshot();
  ASSERT_EQ(recs.size(), 3u);  // the newest three: #3, #4, #5
  EXPECT_EQ(recs[0].seq, 3u);
  EXPECT_EQ(recs[0].state, FlightRecorder::State::kDone);
  EXPECT_EQ(recs[1].state, FlightRecorder::State::kStarted);
  EXPECT_EQ(recs[2].state, FlightRecorder::State::kEnqueued);
  EXPECT_EQ(recs[0].bytes, 40);
  EXPECT_GT(recs[1].start_s, 0);
  EXPECT_LT(recs[1].end_s, 0);
  std::string path = f.dump("test");
  ASSERT_EQ(path, dir + "/flight/rank-1.json");
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  EXPECT_EQ(j["job"], "job-a");
  EXPECT_EQ(j["world_size"], 4);
  EXPECT_EQ(j["recorded"], 5);
  EXPECT_EQ(j["records"].size(), 3u);
  EXPECT_EQ(j["records"][1]["state"], "started");
  EXPECT_EQ(j["records"][0]["tag"], "ddp.bucket[0]");
  for (const auto& e : std::filesystem::directory_iterator(dir + "/flight"))
    EXPECT_EQ(e.path().filename(), "rank-1.json");  // no temporary left behind
  f.configure(0, dir, 1, 4, "job-b");               // off: nothing recorded or dumped
  f.enqueue("cpu", op(1));
  EXPECT_TRUE(f.snapshot().empty());
  EXPECT_EQ(f.dump("off"), "");
  std::filesystem::remove_all(dir);
}
