// FlightRecorder: every rank's last N collectives, for a post-mortem of a hang or a desync
// (`hpctrain flight DIR`, diag/flight_report.h). One per process.
//
// Contract:
// - configure(capacity, dir, rank, world, job): capacity 0 turns it off (nothing is recorded or
//   dumped); `job` is the same on every rank of one job (the trainer broadcasts rank 0's) so
//   dumps of different jobs are told apart. Call it once per run, before the first collective.
// - enqueue/start/end are called by the MPI backend (lane "cpu": when a collective is submitted
//   to the comm thread, when it starts, when it ends, ok or failed) and by the NCCL backend (lane
//   "cuda": when called, when put on the comm stream, when its completion event is first seen
//   fired, within the watchdog's poll interval). A record holds the lane, the
//   lane's sequence number, op, tag, dtype, elements, bytes, the three wall-clock times (seconds
//   since the epoch; -1 when not reached) and the state (enqueued, started, done, failed). The
//   ring keeps the newest `capacity` records. Cost: one uncontended mutex and a few string
//   copies per collective (perf/README "Flight recorder").
// - dump(reason) writes <dir>/flight/rank-<r>.json atomically (temporary name, then rename) and
//   returns its path ("" when off or on failure; never throws). It is called when the watchdog
//   fires (on the reporting rank and on every rank its report request reaches), on a desync, on
//   a fatal error (through runtime/guard.h's fatal-error hooks), and on SIGUSR2, which only sets
//   a flag: a recorder thread polls it every 100 ms and dumps while training goes on.
// - The dump: {"job","rank","world_size","host","pid","reason","dumped_at","capacity",
//   "recorded" (all time), "records":[...oldest first]}.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/op_info.h"

namespace hpctrain {

class FlightRecorder {
 public:
  enum class State { kEnqueued, kStarted, kDone, kFailed };
  struct Record {
    std::string lane, op, tag, dtype;
    uint64_t seq = 0;
    int64_t numel = 0, bytes = 0;
    double enqueue_s = -1, start_s = -1, end_s = -1;
    State state = State::kEnqueued;
  };

  static FlightRecorder& get();
  ~FlightRecorder();

  void configure(int64_t capacity, std::string dir, int rank, int world, std::string job);
  bool enabled() const { return capacity_.load(std::memory_order_relaxed) > 0; }

  void enqueue(const std::string& lane, const OpInfo& info);
  void start(const std::string& lane, uint64_t seq);
  void end(const std::string& lane, uint64_t seq, bool ok);

  std::string dump(const std::string& reason) noexcept;
  // The newest records, oldest first (tests).
  std::vector<Record> snapshot() const;

  static const char* state_name(State s);

 private:
  FlightRecorder() = default;
  Record* find(const std::string& lane, uint64_t seq);  // caller holds mu_
  void poll_signal();

  mutable std::mutex mu_;
  std::atomic<int64_t> capacity_{0};
  std::vector<Record> ring_;
  uint64_t recorded_ = 0;  // records ever written; the newest is ring_[(recorded_ - 1) % capacity]
  std::string dir_, job_;
  int rank_ = 0, world_ = 1;

  std::mutex thread_mu_;
  std::condition_variable thread_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hpctrain
