// flight_report on hand-made dumps: the stuck op, ranks that never entered it, a missing dump,
// the first disagreement, the newest of several jobs' directories (or the one asked for), and
// the errors (no dumps, two jobs in one directory, an unknown job).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "diag/flight_report.h"
#include "runtime/check.h"

using nlohmann::json;

namespace {

json rec(uint64_t seq, const char* state, int64_t numel = 100, double start = 100, double end = 101) {
  return {{"lane", "cpu"},
          {"seq", seq},
          {"op", "allreduce"},
          {"tag", "ddp.bucket[0]"},
          {"dtype", "float32"},
          {"numel", numel},
          {"bytes", 4 * numel},
          {"enqueue_s", start},
          {"start_s", std::string(state) == "enqueued" ? -1.0 : start},
          {"end_s", std::string(state) == "done" ? end : -1.0},
          {"state", state}};
}

void write_dump(const std::string& dir, int rank, int world, const std::string& job, const json& records,
                double dumped_at = 110.0, const std::string& sub = "", json extra = json::object()) {
  const std::string d = dir + "/flight" + (sub.empty() ? "" : "/" + sub);
  std::filesystem::create_directories(d);
  json j = {{"job", job},       {"rank", rank},            {"world_size", world}, {"host", "h" + std::to_string(rank)},
            {"reason", "test"}, {"dumped_at", dumped_at}, {"records", records}};
  j.update(extra);
  std::ofstream(d + "/rank-" + std::to_string(rank) + ".json") << j.dump();
}

struct Dir {
  Dir() {
    char t[] = "/tmp/hpctrain-flightrep-XXXXXX";
    path = ::mkdtemp(t);
  }
  ~Dir() { std::filesystem::remove_all(path); }
  std::string path;
};

}  // namespace

TEST(FlightReport, StuckOpMissingRankAndNeverEntered) {
  Dir d;
  write_dump(d.path, 0, 3, "j", json::array({rec(6, "done"), rec(7, "started", 100, 104)}));
  write_dump(d.path, 1, 3, "j", json::array({rec(6, "done", 100, 100, 103)}));
  std::string r = hpctrain::flight_report(d.path);
  EXPECT_NE(r.find("dumps from ranks 0,1; missing: rank 2"), std::string::npos) << r;
  EXPECT_NE(r.find("last sequence number finished: rank 0 #6; rank 1 #6"), std::string::npos) << r;
  EXPECT_NE(
      r.find("stuck in #7 allreduce(float32, 100) from ddp.bucket[0]: entered by rank 0; never entered by rank 1"),
      std::string::npos)
      << r;
  EXPECT_NE(r.find("rank 0 6.0 s in #7; rank 1 7.0 s waiting since #6 ended"), std::string::npos) << r;
  EXPECT_EQ(r.find("disagree"), std::string::npos) << r;
}

TEST(FlightReport, AnOpFinishedAfterTheFirstDumpWasStillInProgress) {
  // Rank 1 was stopped inside #7; the abort continued it (SIGCONT), it finished #7 at 112 (rank 0
  // had done its part) and dumped at 112.5. As of rank 0's dump at 110 both ranks were in #7.
  Dir d;
  write_dump(d.path, 0, 2, "j", json::array({rec(6, "done"), rec(7, "started", 100, 104)}), 110.0);
  write_dump(d.path, 1, 2, "j", json::array({rec(6, "done"), rec(7, "done", 100, 104.5, 112), rec(8, "started", 100, 112.2)}),
             112.5);  // and went on into #8 before it dumped
  std::string r = hpctrain::flight_report(d.path);
  EXPECT_NE(r.find("last sequence number finished: rank 0 #6; rank 1 #6"), std::string::npos) << r;
  EXPECT_NE(r.find("stuck in #7 allreduce(float32, 100) from ddp.bucket[0]: entered by ranks 0,1; never entered by none"),
            std::string::npos)
      << r;
  EXPECT_NE(r.find("rank 0 6.0 s in #7; rank 1 8.0 s in #7"), std::string::npos) << r;
}

TEST(FlightReport, FirstDisagreement) {
  Dir d;
  write_dump(d.path, 0, 2, "j", json::array({rec(4, "done"), rec(5, "done", 100), rec(6, "done", 300)}));
  write_dump(d.path, 1, 2, "j", json::array({rec(4, "done"), rec(5, "done", 200), rec(6, "done", 400)}));
  std::string r = hpctrain::flight_report(d.path + "/flight");  // the flight/ directory itself works too
  EXPECT_NE(r.find("ranks disagree first at #5: rank 0 called allreduce(float32, 100); rank 1 called "
                   "allreduce(float32, 200)"),
            std::string::npos)
      << r;
  EXPECT_NE(r.find("no collective in flight"), std::string::npos) << r;
}

TEST(FlightReport, BadInput) {
  Dir d;
  EXPECT_THROW(hpctrain::flight_report(d.path), hpctrain::CollectiveError);  // no dumps
  write_dump(d.path, 0, 2, "job-a", json::array({rec(1, "done")}));
  write_dump(d.path, 1, 2, "job-b", json::array({rec(1, "done")}));
  try {
    hpctrain::flight_report(d.path);
    FAIL() << "two jobs accepted";
  } catch (const hpctrain::CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("two different jobs"), std::string::npos) << e.what();
  }
}

TEST(FlightReport, NewestJobByDefaultAnotherOnRequest) {
  // A 2-rank job that hung (rank 1's dump missing), then its restart on 1 rank (a shrink) that
  // dumped too: each in its own directory. Named so that the older sorts last by name.
  Dir d;
  const json old_job = {{"started_at", 100.0}, {"restart", 0}};
  const json new_job = {{"started_at", 200.0}, {"restart", 1}};
  write_dump(d.path, 0, 2, "zz-old", json::array({rec(6, "done"), rec(7, "started", 100, 104)}), 110.0, "zz-old",
             old_job);
  write_dump(d.path, 0, 1, "aa-new", json::array({rec(3, "done", 100, 201, 202)}), 210.0, "aa-new", new_job);
  std::string r = hpctrain::flight_report(d.path);
  EXPECT_EQ(r.rfind("flight: job aa-new (restart 1), 1 rank(s); dumps from rank 0; missing: none\n", 0), 0u) << r;
  EXPECT_NE(r.find("flight: other jobs in " + d.path + "/flight (newest first): zz-old; read one with: hpctrain "
                   "flight " + d.path + "/flight --job ID"),
            std::string::npos)
      << r;
  r = hpctrain::flight_report(d.path, "zz-old");
  EXPECT_EQ(r.rfind("flight: job zz-old, 2 rank(s); dumps from rank 0; missing: rank 1", 0), 0u) << r;
  EXPECT_NE(r.find("other jobs in " + d.path + "/flight (newest first): aa-new (restart 1);"), std::string::npos) << r;
  EXPECT_NE(r.find("stuck in #7"), std::string::npos) << r;
  r = hpctrain::flight_report(d.path + "/flight/zz-old");  // one job's directory
  EXPECT_EQ(r.rfind("flight: job zz-old, 2 rank(s)", 0), 0u) << r;
  EXPECT_EQ(r.find("other jobs"), std::string::npos) << r;
  try {
    hpctrain::flight_report(d.path, "nope");
    FAIL() << "an unknown job accepted";
  } catch (const hpctrain::CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("--job nope: no dumps of that job in " + d.path +
                                         "/flight (jobs there: aa-new, zz-old)"),
              std::string::npos)
        << e.what();
  }
}
