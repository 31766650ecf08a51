// CommThread: runs submitted jobs one at a time, in submission order, on its own thread.
// Each job gets a Work handle whose wait() blocks until the job has run and rethrows its error.
//
// Contract:
// - Jobs run one at a time in submission order; submit() never blocks on a running job.
// - wait() on a job that has not started, while no job is running, runs the queued jobs up to
//   and including it on the waiting thread (in order, through the same OpGuard as on the comm
//   thread), so a caller that waits at once (a synchronous
//   collective) does not pay a wake-up of the comm thread and its wait for a core. A job that
//   the comm thread has started is waited for. Jobs must not depend on which thread runs them.
// - submit() wakes the comm thread, except inside a CallerWaits scope (comm/caller_waits.h):
//   there the caller will wait at once and run the job itself, and the comm thread is woken
//   only when the scope ends with the job still queued.
// - Every job passes the OpGuard given at construction (comm/guard/op_guard.h; none: jobs are
//   only numbered): submit() under the queue's lock, begin() before the job (a throw fails the
//   job without running it), end() after it, failed or not.
// - The destructor runs every job already submitted, then joins.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "comm/communicator.h"
#include "comm/op_info.h"

namespace hpctrain {

class CommThread;
class OpGuard;

class ThreadWork final : public Work {
 public:
  ThreadWork(CommThread* owner, uint64_t seq) : owner_(owner), seq_(seq) {}
  void wait() override;
  bool done() const override { return done_.load(std::memory_order_acquire); }
  // Sets the result; the owner then wakes waiters (CommThread::finish_locked).
  void complete(std::exception_ptr err);
  uint64_t seq() const { return seq_; }

 private:
  CommThread* owner_;  // only touched while the job is not done (the owner outlives its jobs)
  uint64_t seq_;
  std::atomic<bool> done_{false};
  std::exception_ptr err_;  // written before done_ (release), read after it (acquire)
};

class CommThread {
 public:
  // `guard` (may be null) must outlive the thread.
  explicit CommThread(OpGuard* guard = nullptr);
  ~CommThread();
  WorkHandle submit(OpInfo info, std::function<void()> job);

 private:
  friend class ThreadWork;
  struct Job {
    OpInfo info;
    std::function<void()> fn;
    std::shared_ptr<ThreadWork> work;
  };
  void loop();
  // Wakes the comm thread if a job is queued (CallerWaits' deferred start).
  static void wake(void* self);
  // Blocks until `w` is done, running queued jobs up to it on this thread when none is running.
  void wait_for(const ThreadWork& w);
  // With `lk` held, the queue non-empty and no job running: pops the front job, runs it with the
  // lock released, and takes the lock again.
  void run_front(std::unique_lock<std::mutex>& lk);

  std::mutex mu_;
  std::condition_variable cv_;       // the comm thread: a job to run, or stop
  std::condition_variable done_cv_;  // waiters: a job ended
  std::deque<Job> queue_;
  bool running_ = false;  // a job is running (on the comm thread or a waiter)
  int waiters_ = 0;       // threads asleep on done_cv_
  bool stop_ = false;
  uint64_t next_seq_ = 1;  // without a guard
  OpGuard* const guard_;
  std::thread thread_;
};

}  // namespace hpctrain
