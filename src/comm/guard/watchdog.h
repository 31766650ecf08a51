// Watchdog: no silent hangs. One per rank (shared by the MPI and NCCL backends of a
// DeviceRouter), with its own thread and its own side-channel communicator.
//
// Contract:
// - Reports quote the training step (comm/guard/op_guard.h: current_step()).
// - Each backend's OpGuard (comm/guard/op_guard.h) registers a lane and reports, per collective, begin(info) and either end(seq)
//   (synchronous lanes: the MPI comm thread) or a `done` probe that the watchdog polls
//   (asynchronous lanes: NCCL events). The hot path is a lock-free-in-practice (uncontended)
//   mutex, a timestamp and an OpInfo copy: no MPI traffic per collective.
// - When the oldest unfinished op of a lane is older than the timeout, the watchdog asks every
//   peer's watchdog thread for its lanes' progress over the side channel (non-blocking
//   point-to-point on a duplicate communicator, so it does not depend on the stuck collective;
//   the peers' watchdog threads answer even while their comm threads are blocked), waits a
//   bounded time for answers, prints ONE report line on stderr ("hpctrain: rank R: collective
//   ... timed out after T s; ranks that reached it: ...; ranks that did not: ..."), runs the
//   abort hooks (ncclCommAbort) and calls MPI_Abort(MPI_COMM_WORLD, kWatchdogExitCode).
// - Only one rank reports: a rank that has received another rank's report request stays
//   silent (and still answers), unless the job is still alive after a grace period.
// - Construction is collective over `parent`; lanes must be added in the same order on every
//   rank. Destruction stops the thread (it never aborts a job that is shutting down cleanly).
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "comm/guard/watchdog_report.h"

namespace hpctrain {

class WatchdogLane {
 public:
  using Clock = std::chrono::steady_clock;
  // Op `info` starts on this rank now (info.seq must increase by one per call).
  // `done`, when given, is polled by the watchdog thread to learn that the op finished.
  void begin(const OpInfo& info, std::function<bool()> done = {});
  // The op `seq` finished (successfully or not). For lanes without `done` probes.
  void end(uint64_t seq);
  LaneStatus status() const;
  const std::string& name() const { return name_; }

 private:
  friend class Watchdog;
  WatchdogLane(int index, std::string name)
      : index_(index), name_(std::move(name)) {}
  // Polls done probes, then returns the oldest unfinished op if it is older than `timeout`.
  std::optional<OverdueOp> overdue(Clock::time_point now, Clock::duration timeout);

  struct Pending {
    OpInfo info;
    Clock::time_point start;
    int64_t step;
    std::function<bool()> done;
  };
  const int index_;
  const std::string name_;
  mutable std::mutex mu_;
  std::deque<Pending> pending_;
  LaneStatus last_;  // started/finished counters and the last started op's fingerprint
};

class Watchdog {
 public:
  Watchdog(MPI_Comm parent, double timeout_s);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // At most kMaxLanes; the returned lane lives as long as the watchdog.
  WatchdogLane& add_lane(const std::string& name);
  // Runs before MPI_Abort when a timeout is reported (e.g. ncclCommAbort). Must not block.
  void add_abort_hook(std::function<void()> hook);
  double timeout_s() const { return timeout_s_; }

  // This rank's progress on every lane.
  PeerStatus own_status() const;
  // Asks every other rank's watchdog for its status and waits up to `wait_s` for answers;
  // [r] is nullopt for a rank that did not answer. Not collective: peers' watchdog threads
  // answer. Used by the timeout report; public so tests can check the side channel.
  std::vector<std::optional<PeerStatus>> query_peers(double wait_s) { return query(wait_s, false); }

 private:
  std::vector<std::optional<PeerStatus>> query(double wait_s, bool reporting);
  void loop();
  void serve();  // answers pending status requests (any thread; serialized by serve_mu_)
  void post_request_recv();
  void on_overdue(const OverdueOp& op);
  [[noreturn]] void report_and_abort(const OverdueOp& op, const std::vector<std::optional<PeerStatus>>& peers);

  const double timeout_s_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::atomic<int> round_{0};

  mutable std::mutex lanes_mu_;
  std::vector<std::unique_ptr<WatchdogLane>> lanes_;
  std::vector<std::function<void()>> abort_hooks_;

  std::mutex serve_mu_;
  int32_t request_[2] = {0, 0};  // {kind, round} of the incoming request
  MPI_Request request_recv_ = MPI_REQUEST_NULL;
  std::list<std::pair<std::unique_ptr<PeerStatus>, MPI_Request>> replies_;
  std::atomic<int> reporter_{-1};  // lowest rank that announced a report, -1 if none
  std::optional<std::chrono::steady_clock::time_point> deferred_since_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hpctrain
