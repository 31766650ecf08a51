// Tracer: a process-wide Chrome-trace recorder (chrome://tracing, Perfetto).
//
// Contract:
// - Disabled by default; then a TraceSpan costs one relaxed atomic load.
// - Spans are complete events ("ph":"X") with pid = rank and tid = a small thread id
//   (0 = the training thread, 1 = the comm thread, 2 = the loader thread, ...).
// - events_json() returns this rank's events as a JSON array; the trainer gathers every
//   rank's array to rank 0, which writes one file.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

namespace hpctrain {

class Tracer {
 public:
  static Tracer& get();
  void enable(int rank);
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  void record(std::string name, const char* cat, double t0_us, double t1_us, int tid);
  std::string events_json() const;
  static double now_us();

 private:
  struct Event {
    std::string name;
    const char* cat;
    double t0, t1;
    int tid;
  };
  std::atomic<bool> enabled_{false};
  int rank_ = 0;
  mutable std::mutex mu_;
  std::vector<Event> events_;
};

class TraceSpan {
 public:
  TraceSpan(std::string name, const char* cat, int tid = 0);
  ~TraceSpan();
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  bool on_;
  std::string name_;
  const char* cat_;
  int tid_;
  double t0_ = 0;
};

}  // namespace hpctrain
