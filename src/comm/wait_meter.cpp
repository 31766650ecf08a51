#include "comm/wait_meter.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace hpctrain {
namespace {

// Field 2 of /proc/self/task/TID/schedstat: ns spent runnable, waiting for a CPU.
uint64_t thread_run_delay_ns(int tid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", tid);
  std::FILE* f = std::fopen(path, "r");
  if (!f) return 0;
  unsigned long long run = 0, delay = 0;
  int got = std::fscanf(f, "%llu %llu", &run, &delay);
  std::fclose(f);
  return got == 2 ? delay : 0;
}

}  // namespace

CollectiveWaitMeter& CollectiveWaitMeter::get() {
  static CollectiveWaitMeter m;
  return m;
}

void CollectiveWaitMeter::add(double seconds) {
  if (!enabled() || seconds < 0) return;
  ns_.fetch_add(static_cast<uint64_t>(seconds * 1e9), std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

void CollectiveWaitMeter::register_thread() {
  int tid = static_cast<int>(syscall(SYS_gettid));
  std::lock_guard<std::mutex> lk(mu_);
  tids_.push_back(tid);
}

void CollectiveWaitMeter::unregister_thread() {
  int tid = static_cast<int>(syscall(SYS_gettid));
  uint64_t d = thread_run_delay_ns(tid);
  std::lock_guard<std::mutex> lk(mu_);
  auto it = std::find(tids_.begin(), tids_.end(), tid);
  if (it == tids_.end()) return;
  tids_.erase(it);
  ended_delay_ns_ += d;
}

double CollectiveWaitMeter::run_delay_s() const {
  std::lock_guard<std::mutex> lk(mu_);
  uint64_t ns = ended_delay_ns_;
  for (int tid : tids_) ns += thread_run_delay_ns(tid);
  return static_cast<double>(ns) * 1e-9;
}

}  // namespace hpctrain
