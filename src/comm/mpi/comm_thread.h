// CommThread: runs submitted jobs one at a time, in submission order, on its own thread.
// Each job gets a Work handle whose wait() blocks until the job has run and rethrows its error.
// The destructor runs every job already submitted, then joins.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "comm/communicator.h"
#include "comm/op_info.h"

namespace hpctrain {

class ThreadWork final : public Work {
 public:
  void wait() override;
  bool done() const override;
  void complete(std::exception_ptr err);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr err_;
};

class CommThread {
 public:
  // Observers see each job's OpInfo when it starts and ends (watchdog, tracing). Optional.
  // on_start may throw to fail the job without running it (desync check); on_end runs after
  // every job, failed or not, and must not throw.
  using Hook = std::function<void(const OpInfo&)>;

  CommThread();
  ~CommThread();
  WorkHandle submit(OpInfo info, std::function<void()> job);
  void set_hooks(Hook on_start, Hook on_end);

 private:
  struct Job {
    OpInfo info;
    std::function<void()> fn;
    std::shared_ptr<ThreadWork> work;
  };
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stop_ = false;
  uint64_t next_seq_ = 1;
  Hook on_start_, on_end_;
  std::thread thread_;
};

}  // namespace hpctrain
