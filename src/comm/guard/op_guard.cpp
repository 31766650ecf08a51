// OpGuard: the watchdog lane, flight recorder, desync check, wait meter and trace span of every
// collective, in one place (op_guard.h).
#include "comm/guard/op_guard.h"

#include <atomic>

#include "comm/comm_settings.h"
#include "comm/guard/desync.h"
#include "comm/guard/flight_recorder.h"
#include "comm/guard/wait_meter.h"
#include "comm/guard/watchdog.h"
#include "runtime/check.h"
#include "runtime/trace.h"

namespace hpctrain {
namespace {
std::atomic<int64_t> g_step{-1};
}  // namespace

void set_current_step(int64_t step) { g_step.store(step, std::memory_order_relaxed); }
int64_t current_step() { return g_step.load(std::memory_order_relaxed); }

OpGuard::OpGuard(MPI_Comm parent, const CommSettings& settings, std::shared_ptr<Watchdog> watchdog,
                 std::string flight_lane, std::string watchdog_lane, Lane kind)
    : watchdog_(std::move(watchdog)), flight_lane_(std::move(flight_lane)), kind_(kind) {
  if (watchdog_) lane_ = &watchdog_->add_lane(watchdog_lane);
  if (settings.debug_collectives) HPC_MPI_CHECK(MPI_Comm_dup(parent, &debug_));
}

OpGuard::~OpGuard() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin && debug_ != MPI_COMM_NULL) MPI_Comm_free(&debug_);
}

void OpGuard::submit(OpInfo& info) {
  info.seq = next_seq_++;
  FlightRecorder::get().enqueue(flight_lane_, info);
}

void OpGuard::begin(const OpInfo& info, std::function<bool()> done) {
  if (lane_) lane_->begin(info, std::move(done));  // first: a hung fingerprint exchange is watched too
  check_desync(info);
  FlightRecorder::get().start(flight_lane_, info.seq);
  if (kind_ != Lane::kSync) return;
  // The op's run time here is its wait: it starts once submitted and every earlier op is done,
  // and ends when its data has arrived (wait_meter.h). The timeline shows it on the comm row.
  CollectiveWaitMeter& meter = CollectiveWaitMeter::get();
  timed_ = meter.enabled() && info.metered;
  if (timed_) t0_ = std::chrono::steady_clock::now();
  if (Tracer::get().enabled()) span_ = std::make_unique<TraceSpan>(info.tag.empty() ? info.op : info.tag, "comm.wait", 1);
}

void OpGuard::check_desync(const OpInfo& info) {
  if (desync_) std::rethrow_exception(desync_);
  if (debug_ == MPI_COMM_NULL) return;
  try {
    check_fingerprints(debug_, info);
  } catch (const CollectiveError&) {
    desync_ = std::current_exception();  // every later op fails the same way
    throw;
  }
}

void OpGuard::end(const OpInfo& info, bool ok) noexcept {
  if (kind_ == Lane::kSync) {
    if (timed_ && ok)
      CollectiveWaitMeter::get().add(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
    timed_ = false;
    span_.reset();
    if (lane_) lane_->end(info.seq);  // an op that threw has ended: the watchdog must not take it for a hang
  }
  FlightRecorder::get().end(flight_lane_, info.seq, ok);
}

}  // namespace hpctrain
