// CollectiveWaitMeter: how long this process waited inside collectives, for straggler
// detection (metrics/straggler.h).
//
// Contract:
// - Process-wide, off by default. While off, add() is one relaxed atomic load and records
//   nothing; the trainer turns it on unless --straggler-threshold is 0.
// - What a backend adds per collective is the time from the moment the op could start on this
//   rank (submitted and every earlier op done: in-order execution) until its data arrived, i.e.
//   the op's run time (on the comm thread, or on a caller that runs it in wait()). The rank that arrives last at a collective waits
//   least in it; a rank that arrives early waits for the last one. No clock sync is involved.
// - A rank that shares its core with a noisy neighbour is slow inside collectives as well, so
//   its wait is not ~0; it is still the smallest. (Subtracting the comm thread's run-queue
//   delay was tried and dropped: Open MPI spins with sched_yield, so a waiting thread is
//   runnable too and accrues run-queue delay as much as the starved one.)
// - total_s() and count() only grow; callers take differences over their own intervals.
// - Backends measured: MPI (CommThread). NCCL ops complete asynchronously on a stream and
//   are not measured (their wait is not visible to the host without events).
#pragma once

#include <atomic>
#include <cstdint>

namespace hpctrain {

class CollectiveWaitMeter {
 public:
  static CollectiveWaitMeter& get();
  void enable(bool on) { on_.store(on, std::memory_order_relaxed); }
  bool enabled() const { return on_.load(std::memory_order_relaxed); }
  void add(double seconds);
  double total_s() const { return static_cast<double>(ns_.load(std::memory_order_relaxed)) * 1e-9; }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> on_{false};
  std::atomic<uint64_t> ns_{0}, count_{0};
};

}  // namespace hpctrain
