// FlightRecorder: every rank's last N collectives, for a post-mortem of a hang or a desync
// (`hpctrain flight DIR`, diag/flight_report.h). One per process.
//
// Contract:
// - configure(capacity, dir, rank, world, job): capacity 0 turns it off (nothing is recorded or
//   dumped); `job` is the same on every rank of one job (the trainer broadcasts rank 0's id and
//   start time) so dumps of different jobs are told apart; `job.restart` is the launcher's
//   restart number (HPCTRAIN_RESTART), 0 for a first attempt. Call it once per run, before the
//   first collective.
// - enqueue/start/end are called by the MPI backend (lane "cpu": when a collective is submitted
//   to the comm thread, when it starts, when it ends, ok or failed) and by the NCCL backend (lane
//   "cuda": when called, when put on the comm stream, when its completion event is first seen
//   fired, within the watchdog's poll interval). A record holds the lane, the
//   lane's sequence number, op, tag, dtype, elements, bytes, the three wall-clock times (seconds
//   since the epoch; -1 when not reached) and the state (enqueued, started, done, failed). The
//   ring keeps the newest `capacity` records. Cost: one uncontended mutex and a few string
//   copies per collective (perf/README "Flight recorder").
// - dump(reason) writes <dir>/flight/<job id>/rank-<r>.json (one directory per job, so a
//   restarted or shrunk job never mixes its dumps with an earlier attempt's; <dir>/flight/ when
//   the id is "") through a temporary name and a rename, and returns its path. It never throws
//   and never holds its caller longer than kDumpDeadlineS: the file is written on a thread of its
//   own, and a write that has not finished by then (a hung file system) is left behind. A
//   failed or late dump prints one line on stderr ("hpctrain: rank R: flight recorder: ...")
//   and returns ""; a failed one leaves no temporary file. Off: returns "" silently.
//   It is called when the watchdog fires (on the reporting rank and on every rank its report
//   request reaches), on a desync, on a fatal error (through runtime/guard.h's fatal-error
//   hooks, so the abort waits at most kDumpDeadlineS for it), and on SIGUSR2, which only sets a
//   flag: a recorder thread polls it every 100 ms and dumps while training goes on.
// - catch_dump_signal() makes SIGUSR2 harmless in this process: while no recorder is on (a
//   command without one, --flight-records 0) the signal only prints one line saying it is
//   ignored. configure() calls it; hpctrain's main() calls it for every command.
// - The dump: {"job","restart","started_at","rank","world_size","host","pid","reason",
//   "dumped_at","capacity","recorded" (all time), "records":[...oldest first]}.
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
  // One job (one attempt of a run): the same on every rank.
  struct Job {
    std::string id;         // a file name: the dumps' directory under <dir>/flight/
    double started_at = 0;  // seconds since the epoch (rank 0's clock)
    int64_t restart = 0;    // the launcher's restart number; 0: first attempt
  };
  static constexpr double kDumpDeadlineS = 10;

  static FlightRecorder& get();
  ~FlightRecorder();

  void configure(int64_t capacity, std::string dir, int rank, int world, Job job);
  bool enabled() const { return capacity_.load(std::memory_order_relaxed) > 0; }
  static void catch_dump_signal();

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
  std::string dir_;
  Job job_;
  int rank_ = 0, world_ = 1;
  bool hooked_ = false;  // the fatal-error hook is installed (once per process)

  std::mutex thread_mu_;
  std::condition_variable thread_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hpctrain
