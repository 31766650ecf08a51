// OpGuard: the one door every collective of a backend passes, and behind it every monitor of
// collectives: the watchdog (no silent hangs), the flight recorder (post-mortems), the desync
// check (--debug-collectives), the collective wait meter (stragglers) and the trace timeline.
// A new backend calls the guard and gets them all; a new monitor is added here, once.
//
// Contract (per op, in this order):
// - submit(info): the op was handed to the backend. Numbers it (info.seq: 1, 2, ... per guard,
//   in submission order; call under the backend's own ordering) and records it as enqueued.
// - begin(info, done): the op starts on this rank. The watchdog lane starts its clock (first,
//   so a hung fingerprint exchange is watched like the op itself); with --debug-collectives the
//   ranks exchange fingerprints and a mismatch throws the same CollectiveError on every rank,
//   after which every later begin() throws it again without any MPI call (no rank hangs behind
//   a desynced queue); the flight recorder marks the op started. On a synchronous lane (no
//   `done`) the op's run time is metered and traced until end(). An asynchronous lane (NCCL:
//   the op completes on a stream) passes `done`, which the watchdog polls.
// - end(info, ok): exactly once for every op begun, begin() having thrown or not: the op
//   finished (ok) or failed (!ok: begin or the op threw). Synchronous lanes call it when the op
//   returns; asynchronous ones when `done` is first seen true or launching failed. Never throws.
// - set_current_step(step) (process-wide, one relaxed atomic store): the training step, quoted
//   in watchdog reports. The trainer calls it once per step; nothing else is needed from the
//   communicator.
// Thread safety: submit() is called in submission order; begin()/end() of one synchronous
// lane run one op at a time (the comm thread or a caller running it); an asynchronous lane's
// end() may come from the watchdog thread.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "comm/op_info.h"

namespace hpctrain {

struct CommSettings;
class TraceSpan;
class Watchdog;
class WatchdogLane;

void set_current_step(int64_t step);
int64_t current_step();  // -1 until set

class OpGuard {
 public:
  enum class Lane { kSync, kAsync };
  // Collective over `parent` when settings.debug_collectives (the fingerprint channel is a
  // duplicate of it). `flight_lane` names the lane in flight-recorder dumps ("cpu", "cuda"),
  // `watchdog_lane` in watchdog reports ("mpi", "nccl"); `watchdog` may be null (timeout off).
  OpGuard(MPI_Comm parent, const CommSettings& settings, std::shared_ptr<Watchdog> watchdog,
          std::string flight_lane, std::string watchdog_lane, Lane kind);
  ~OpGuard();
  OpGuard(const OpGuard&) = delete;
  OpGuard& operator=(const OpGuard&) = delete;

  void submit(OpInfo& info);
  void begin(const OpInfo& info, std::function<bool()> done = {});
  void end(const OpInfo& info, bool ok) noexcept;

  Watchdog* watchdog() const { return watchdog_.get(); }
  const std::string& flight_lane() const { return flight_lane_; }

 private:
  void check_desync(const OpInfo& info);

  std::shared_ptr<Watchdog> watchdog_;
  WatchdogLane* lane_ = nullptr;
  const std::string flight_lane_;
  const Lane kind_;
  uint64_t next_seq_ = 1;
  MPI_Comm debug_ = MPI_COMM_NULL;  // fingerprint exchange (debug_collectives only)
  std::exception_ptr desync_;       // the first mismatch; every later op fails with it
  // The running op of a synchronous lane (one at a time): its metering start and trace span.
  bool timed_ = false;
  std::chrono::steady_clock::time_point t0_;
  std::unique_ptr<TraceSpan> span_;
};

}  // namespace hpctrain
