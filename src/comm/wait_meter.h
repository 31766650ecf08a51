// CollectiveWaitMeter: how long this process waited inside collectives, for straggler
// detection (train/straggler.h).
//
// Contract:
// - Process-wide, off by default. While off, add() is one relaxed atomic load and records
//   nothing; the trainer turns it on unless --straggler-threshold is 0.
// - What a backend adds per collective is the time from the moment the op could start on this
//   rank (submitted and every earlier op done: in-order execution) until its data arrived, i.e.
//   the run time of the op on the comm thread. The rank that arrives last at a collective waits
//   least in it; a rank that arrives early waits for the last one. No clock sync is involved.
// - A rank whose CPU is shared (a noisy neighbour) is also slow INSIDE collectives: its comm
//   thread waits for a core, not for data. Comm threads register themselves, and
//   run_delay_s() sums the time they spent runnable but not running (Linux schedstat). It
//   accrues only while a comm thread is busy (an idle one sleeps), i.e. inside collectives, so
//   total_s() minus run_delay_s() is the wait for other ranks, and run_delay_s() is CPU
//   starvation. Read it once per interval (a few /proc reads); 0 where schedstat is missing.
// - total_s(), count() and run_delay_s() only grow (a thread that ends keeps its share);
//   callers take differences over their own intervals.
// - Backends measured: MPI (the comm thread). NCCL ops complete asynchronously on a stream and
//   are not measured (their wait is not visible to the host without events).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace hpctrain {

class CollectiveWaitMeter {
 public:
  static CollectiveWaitMeter& get();
  void enable(bool on) { on_.store(on, std::memory_order_relaxed); }
  bool enabled() const { return on_.load(std::memory_order_relaxed); }
  void add(double seconds);
  double total_s() const { return static_cast<double>(ns_.load(std::memory_order_relaxed)) * 1e-9; }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  // Called on a comm thread when it starts / before it ends.
  void register_thread();
  void unregister_thread();
  double run_delay_s() const;

 private:
  mutable std::mutex mu_;
  std::vector<int> tids_;
  uint64_t ended_delay_ns_ = 0;
  std::atomic<bool> on_{false};
  std::atomic<uint64_t> ns_{0}, count_{0};
};

}  // namespace hpctrain
