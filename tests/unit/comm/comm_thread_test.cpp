// CommThread (comm/mpi/comm_thread.h): jobs run exactly once, one at a time, in submission
// order, whether the comm thread or a waiting caller runs them; a waiter that finds its job
// queued and nothing running runs it itself; errors reach the waiter; the destructor drains.
// Inside a CallerWaits scope (comm/caller_waits.h) the comm thread is not woken: waited jobs run
// on the caller, unwaited ones start when the scope ends or another CommThread defers.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "comm/caller_waits.h"
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
  CommThread t;
  std::vector<std::string> started, ended;
  t.set_hooks([&](const OpInfo& i) { started.push_back(i.tag); }, [&](const OpInfo& i) { ended.push_back(i.tag); });
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
  EXPECT_EQ(started, (std::vector<std::string>{"bad", "good"}));
  EXPECT_EQ(ended, (std::vector<std::string>{"bad", "good"}));
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

// Lets a fresh comm thread reach its first sleep (a job, then 20 ms), so that only a wake-up
// from submit() can start it.
static void settle(CommThread& t) {
  t.submit(info(), [] {})->wait();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

TEST(CallerWaits, WaitedJobsRunOnTheCallerEvenWhenTheWaitComesLate) {
  // 200 us between submit and wait: time enough for a woken comm thread to take the job (it
  // does, without the scope); inside the scope it is never woken, so the caller runs every job
  // (a spurious wake-up of its condition variable aside).
  CommThread t;
  settle(t);
  const auto me = std::this_thread::get_id();
  int on_caller = 0;
  CallerWaits now;
  for (int i = 0; i < 200; ++i) {
    std::thread::id who;
    WorkHandle w = t.submit(info(), [&] { who = std::this_thread::get_id(); });
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    EXPECT_FALSE(w->done());
    w->wait();
    on_caller += who == me;
  }
  EXPECT_GE(on_caller, 198);
}

TEST(CallerWaits, ManySynchronousWaitsKeepOrder) { EXPECT_GE(sync_waits_on_caller(true), 1990); }

TEST(CallerWaits, UnwaitedJobStartsWhenTheOutermostScopeEnds) {
  CommThread t;
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
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(w->done()) << "started before the outermost scope ended";
  }
  EXPECT_FALSE(CallerWaits::active());
  EXPECT_TRUE(done_within_10s(w)) << "the comm thread was not started at the end of the scope";
  EXPECT_TRUE(ran.load());
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
