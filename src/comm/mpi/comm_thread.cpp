// CommThread: one thread per MPI communicator running collectives in submission order; a
// caller that waits for a job not yet started runs it itself (comm_thread.h).
#include "comm/mpi/comm_thread.h"

#include <pthread.h>

#include "comm/caller_waits.h"
#include "comm/guard/op_guard.h"

namespace hpctrain {

void ThreadWork::wait() {
  if (!done()) owner_->wait_for(*this);
  if (err_) std::rethrow_exception(err_);
}

void ThreadWork::complete(std::exception_ptr err) {
  err_ = err;
  done_.store(true, std::memory_order_release);
}

CommThread::CommThread(OpGuard* guard) : guard_(guard), thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  CallerWaits::forget(this);
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CommThread::wake(void* self) {
  auto* t = static_cast<CommThread*>(self);
  bool queued;
  {
    std::lock_guard<std::mutex> lk(t->mu_);
    queued = !t->queue_.empty();
  }
  // Nothing left: the caller ran it; waking the comm thread would only cost it a core.
  if (queued) t->cv_.notify_one();
}

WorkHandle CommThread::submit(OpInfo info, std::function<void()> job) {
  std::shared_ptr<ThreadWork> work;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (guard_)
      guard_->submit(info);  // numbers it
    else
      info.seq = next_seq_++;
    work = std::make_shared<ThreadWork>(this, info.seq);
    queue_.push_back(Job{std::move(info), std::move(job), work});
  }
  // A caller that waits at once (comm/caller_waits.h) runs the job itself in wait(); the comm
  // thread is woken only if the job is still unstarted when the caller's scope ends.
  if (CallerWaits::active())
    CallerWaits::defer(&CommThread::wake, this);
  else
    cv_.notify_one();
  return work;
}

void CommThread::run_front(std::unique_lock<std::mutex>& lk) {
  Job job = std::move(queue_.front());
  queue_.pop_front();
  running_ = true;
  lk.unlock();
  std::exception_ptr err;
  try {
    if (guard_) guard_->begin(job.info);
    job.fn();
  } catch (...) {
    err = std::current_exception();
  }
  if (guard_) guard_->end(job.info, !err);  // failed jobs too: an op that threw has ended
  job.fn = nullptr;  // the job's captures (tensors) go before its waiter returns
  job.work->complete(err);
  lk.lock();
  running_ = false;
  if (waiters_ > 0) done_cv_.notify_all();
  // A job ran on a waiter: the comm thread may be asleep with more queued behind it.
  if (!queue_.empty() || stop_) cv_.notify_one();
}

void CommThread::wait_for(const ThreadWork& w) {
  std::unique_lock<std::mutex> lk(mu_);
  while (!w.done()) {
    // Queued jobs are in seq order: w has not started while the front's seq is <= its own.
    if (!running_ && !queue_.empty() && queue_.front().info.seq <= w.seq()) {
      run_front(lk);
      continue;
    }
    ++waiters_;
    done_cv_.wait(lk);
    --waiters_;
  }
}

void CommThread::loop() {
  pthread_setname_np(pthread_self(), "hpc-comm");  // named for per-thread profiles
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return !running_ && (stop_ || !queue_.empty()); });
    if (queue_.empty()) return;  // stop_ and drained
    run_front(lk);
  }
}

}  // namespace hpctrain
