// FlightRecorder: records follow enqueue/start/end by lane and sequence number, the ring keeps
// the newest N, a dump is one JSON file written atomically into its job's directory, a failed
// dump says so in one line and leaves nothing behind, capacity 0 records nothing, and SIGUSR2
// does not kill a process whose recorder is off.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "comm/guard/flight_recorder.h"

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
  f.configure(3, dir, 1, 4, {"job-a", 1000.5, 2});
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
  ASSERT_EQ(path, dir + "/flight/job-a/rank-1.json");
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  EXPECT_EQ(j["job"], "job-a");
  EXPECT_EQ(j["restart"], 2);
  EXPECT_EQ(j["started_at"], 1000.5);
  EXPECT_EQ(j["world_size"], 4);
  EXPECT_EQ(j["recorded"], 5);
  EXPECT_EQ(j["records"].size(), 3u);
  EXPECT_EQ(j["records"][1]["state"], "started");
  EXPECT_EQ(j["records"][0]["tag"], "ddp.bucket[0]");
  for (const auto& e : std::filesystem::directory_iterator(dir + "/flight/job-a"))
    EXPECT_EQ(e.path().filename(), "rank-1.json");  // no temporary left behind
  f.configure(0, dir, 1, 4, {"job-b"});             // off: nothing recorded or dumped
  f.enqueue("cpu", op(1));
  EXPECT_TRUE(f.snapshot().empty());
  EXPECT_EQ(f.dump("off"), "");
  std::filesystem::remove_all(dir);
}

TEST(FlightRecorder, FailedDumpSaysSoInOneLineAndLeavesNothing) {
  char tmpl[] = "/tmp/hpctrain-flight-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  std::ofstream(dir + "/flight") << "a file where the dump directory should be\n";
  FlightRecorder& f = FlightRecorder::get();
  f.configure(4, dir, 0, 2, {"job-c"});
  f.enqueue("cpu", op(1));
  testing::internal::CaptureStderr();
  EXPECT_EQ(f.dump("test"), "");
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.rfind("hpctrain: rank 0: flight recorder: no dump (test): cannot create " + dir + "/flight/job-c", 0), 0u)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  size_t entries = 0;
  for (auto it = std::filesystem::directory_iterator(dir); it != std::filesystem::directory_iterator(); ++it) ++entries;
  EXPECT_EQ(entries, 1u);  // only the file put there
  f.configure(0, dir, 0, 2, {"job-c"});
  std::filesystem::remove_all(dir);
}

TEST(FlightRecorder, SigUsr2IsHarmlessWhenOff) {
  FlightRecorder& f = FlightRecorder::get();
  f.configure(0, "/nonexistent", 0, 1, {"job-d"});  // --flight-records 0
  testing::internal::CaptureStderr();
  std::raise(SIGUSR2);  // the default action would end this test program
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("SIGUSR2 ignored"), std::string::npos) << err;
}
