// CommThread (comm/mpi/comm_thread.h): jobs run exactly once, one at a time, in submission
// order, whether the comm thread or a waiting caller runs them; a waiter that finds its job
// queued and nothing running runs it itself; errors reach the waiter; the destructor drains.
// Inside a CallerWaits scope (comm/caller_waits.h) the comm thread is not woken: waited jobs run
// on the caller, unwaited ones start when the scope ends or another CommThread defers.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/caller_waits.h"
#include "comm/comm_settings.h"
#include "comm/guard/flight_recorder.h"
#include "comm/guard/op_guard.h"
#include "comm/mpi/comm_thread.h"

using hpctrain::CallerWaits;
using hpctrain::CommThread;
using hpctrain::OpInfo;
using hpctrain::WorkHandle;

namespace {
OpInfo info() {
  OpInfo i;
  i.op = "test";
  i.dtype = "none";
  return i;
}

// Polls `w->done()` (never wait(), which would run the job) for up to 10 s.
bool done_within_10s(const WorkHandle& w) {
  for (int i = 0; i < 10000 && !w->done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return w->done();
}

// Appends to `order` and checks that no other job is running at the same time.
struct Recorder {
  std::vector<int> order;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::function<void()> job(int i) {
    return [this, i] {
      if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
      order.push_back(i);
      inside.fetch_sub(1);
    };
  }
};
}  // namespace

// 2000 synchronous submit+wait pairs on a fresh CommThread (inside a CallerWaits scope when
// `hint`); checks order and exclusion, returns how many ran on the calling thread.
static int sync_waits_on_caller(bool hint) {
  Recorder rec;
  const auto me = std::this_thread::get_id();
  int on_caller = 0;
  {
    CommThread t;
    std::optional<CallerWaits> now;
    if (hint) now.emplace();
    for (int i = 0; i < 2000; ++i) {
      std::thread::id who;
      t.submit(info(), [&, i] {
        rec.job(i)();
        who = std::this_thread::get_id();
      })->wait();
      on_caller += who == me;
    }
  }
  EXPECT_EQ(rec.order.size(), 2000u);
  for (size_t i = 0; i < rec.order.size(); ++i) EXPECT_EQ(rec.order[i], static_cast<int>(i));
  EXPECT_EQ(rec.overlaps.load(), 0);
  return on_caller;
}

TEST(CommThread, SynchronousWaitsRunInOrderAndSomeRunOnTheCaller) {
  // The comm thread is woken at each submit, but the caller reaches wait() within a
  // microsecond and finds its job still queued far more often than not.
  EXPECT_GT(sync_waits_on_caller(false), 0) << "no synchronous wait ran its job on the caller in 2000 tries";
}

TEST(CommThread, AsyncJobsAndConcurrentWaitersKeepOrderAndRunOnce) {
  Recorder rec;
  constexpr int kJobs = 4000;
  std::vector<WorkHandle> works(kJobs);
  {
    CommThread t;
    for (int i = 0; i < kJobs; ++i) works[i] = t.submit(info(), rec.job(i));
    // Two threads wait from opposite ends while the comm thread also runs jobs.
    std::thread a([&] { for (int i = 0; i < kJobs; ++i) works[i]->wait(); });
    std::thread b([&] { for (int i = kJobs - 1; i >= 0; i -= 7) works[i]->wait(); });
    a.join();
    b.join();
    for (auto& w : works) EXPECT_TRUE(w->done());
  }
  ASSERT_EQ(rec.order.size(), static_cast<size_t>(kJobs));
  for (int i = 0; i < kJobs; ++i) ASSERT_EQ(rec.order[i], i);
  EXPECT_EQ(rec.overlaps.load(), 0);
}

TEST(CommThread, ErrorsReachTheWaiterAndLaterJobsStillRun) {
  // The jobs pass an OpGuard: its flight recorder shows which began and how each ended.
  hpctrain::FlightRecorder& flight = hpctrain::FlightRecorder::get();
  flight.configure(8, std::filesystem::temp_directory_path().string(), 0, 1, {"comm-thread-test"});
  hpctrain::OpGuard guard(MPI_COMM_NULL, hpctrain::CommSettings{}, nullptr, "test", "test",
                          hpctrain::OpGuard::Lane::kSync);
  CommThread t(&guard);
  OpInfo bad = info(), good = info();
  bad.tag = "bad";
  good.tag = "good";
  auto w1 = t.submit(bad, [] { throw std::runtime_error("boom"); });
  bool ran = false;
  auto w2 = t.submit(good, [&] { ran = true; });
  EXPECT_THROW(w1->wait(), std::runtime_error);
  EXPECT_THROW(w1->wait(), std::runtime_error);  // idempotent
  w2->wait();
  EXPECT_TRUE(ran);
  std::vector<std::string> seen;
  for (const auto& r : flight.snapshot())
    if (r.lane == "test") seen.push_back(r.tag + ":" + hpctrain::FlightRecorder::state_name(r.state));
  EXPECT_EQ(seen, (std::vector<std::string>{"bad:failed", "good:done"}));
  flight.configure(0, "", 0, 1, {"comm-thread-test"});
}

TEST(CommThread, DestructorRunsJobsNobodyWaitedFor) {
  Recorder rec;
  std::vector<WorkHandle> works;
  {
    CommThread t;
    for (int i = 0; i < 100; ++i) works.push_back(t.submit(info(), rec.job(i)));
  }
  ASSERT_EQ(rec.order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(rec.order[i], i);
  for (auto& w : works) {
    EXPECT_TRUE(w->done());
    w->wait();  // after the thread is gone: returns at once
  }
}

// Whether every comm thread of this process (threads named "hpc-comm") is asleep: state S in
// /proc/self/task/<tid>/stat. Nothing else holds a CommThread's mutex here, so it sleeps on its
// condition variable, and only a wake-up (or a spurious one) can start it.
static bool comm_threads_asleep() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::string name, stat;
    std::getline(std::ifstream(e.path() / "comm"), name);
    if (name != "hpc-comm") continue;
    std::getline(std::ifstream(e.path() / "stat"), stat);
    const size_t p = stat.rfind(')');  // "tid (comm) S ..."
    if (p == std::string::npos || p + 2 >= stat.size() || stat[p + 2] != 'S') return false;
    ++n;
  }
  return n > 0;
}

// Runs a job, then waits until the comm thread is asleep (an event, not a time), so that only
// a wake-up from submit() can start the next job.
static void settle(CommThread& t) {
  t.submit(info(), [] {})->wait();
  for (int i = 0; i < 10000 && !comm_threads_asleep(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(comm_threads_asleep()) << "the comm thread never went to sleep";
}

TEST(CallerWaits, WaitedJobsRunOnTheCallerEvenWhenTheWaitComesLate) {
  // Up to 2 ms between submit and wait: time for a woken comm thread to take the job (it does,
  // without the scope); inside the scope it is never woken, so the caller runs every job. Each
  // spurious wake-up of the comm thread's condition variable can take one job: a few are
  // tolerated (counted), most jobs taken by the comm thread is the failure.
  CommThread t;
  settle(t);
  const auto me = std::this_thread::get_id();
  int on_comm = 0;
  CallerWaits now;
  for (int i = 0; i < 200; ++i) {
    std::thread::id who;
    WorkHandle w = t.submit(info(), [&] { who = std::this_thread::get_id(); });
    for (int k = 0; k < 20 && !w->done(); ++k) std::this_thread::sleep_for(std::chrono::microseconds(100));
    w->wait();
    on_comm += who != me;
  }
  EXPECT_LE(on_comm, 10) << on_comm << " of 200 jobs ran on the comm thread: it was woken inside the scope";
}

TEST(CallerWaits, ManySynchronousWaitsKeepOrder) { EXPECT_GE(sync_waits_on_caller(true), 1990); }

TEST(CallerWaits, UnwaitedJobStartsWhenTheOutermostScopeEnds) {
  // Ten rounds, each from a sleeping comm thread: the job must not start while the outer scope
  // lasts (20 ms after the inner one ended: a woken comm thread takes it by then), and must start
  // once it ends. A spurious wake-up can start one round's job early: two are tolerated.
  CommThread t;
  int early = 0;
  for (int round = 0; round < 10; ++round) {
    settle(t);
    std::atomic<bool> ran{false};
    WorkHandle w;
    {
      CallerWaits outer;
      {
        CallerWaits inner;
        w = t.submit(info(), [&] { ran = true; });
      }
      EXPECT_TRUE(CallerWaits::active());
      for (int k = 0; k < 20 && !w->done(); ++k) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      early += w->done();
    }
    EXPECT_FALSE(CallerWaits::active());
    EXPECT_TRUE(done_within_10s(w)) << "the comm thread was not started at the end of the scope";
    EXPECT_TRUE(ran.load());
  }
  EXPECT_LE(early, 2) << early << " of 10 jobs started before the outermost scope ended";
}

TEST(CallerWaits, SecondCommThreadStartsTheFirstOnesDeferredJob) {
  CommThread a, b;
  settle(a);
  settle(b);
  CallerWaits now;
  WorkHandle wa = a.submit(info(), [] {});
  WorkHandle wb = b.submit(info(), [] {});
  EXPECT_TRUE(done_within_10s(wa)) << "a's job waited for a scope that b's deferral took over";
  wb->wait();
}

TEST(CallerWaits, CommThreadDestroyedInsideTheScopeDrainsAndIsForgotten) {
  std::atomic<int> ran{0};
  {
    CallerWaits now;
    {
      CommThread t;
      t.submit(info(), [&] { ++ran; });
    }  // the destructor runs the job; the scope's end must not touch `t`
    EXPECT_EQ(ran.load(), 1);
  }
  EXPECT_EQ(ran.load(), 1);
}
