// Watchdog: a thread polls the lanes every timeout/20 (10-100 ms). The side channel is a
// duplicate communicator with MPI_ERRORS_RETURN; requests go on one tag, answers on a tag per
// query round, so a late answer is never taken for a later round's.
#include "comm/guard/watchdog.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "comm/comm_settings.h"
#include "comm/guard/flight_recorder.h"
#include "comm/guard/hang_note.h"
#include "comm/guard/op_guard.h"
#include "runtime/check.h"
#include "runtime/world.h"

namespace hpctrain {
namespace {

using Clock = std::chrono::steady_clock;

// Side-channel tags: requests on one tag, answers on a tag per query round, so a late answer
// to an earlier round is never taken for a current one.
constexpr int kRequestTag = 1;
constexpr int kReplyTagBase = 100;
constexpr int kRounds = 30000;  // MPI guarantees tags up to 32767
enum RequestKind : int32_t { kQuery = 1, kReport = 2 };

Clock::duration to_duration(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

// ---- WatchdogLane ----

void WatchdogLane::begin(const OpInfo& info, std::function<bool()> done) {
  int64_t step = current_step();
  std::lock_guard<std::mutex> lk(mu_);
  pending_.push_back(Pending{info, Clock::now(), step, std::move(done)});
  last_.started = info.seq;
  last_.step = step;
  last_.last = make_fingerprint(info);
}

void WatchdogLane::end(uint64_t seq) {
  std::lock_guard<std::mutex> lk(mu_);
  while (!pending_.empty() && pending_.front().info.seq <= seq) pending_.pop_front();
  last_.finished = std::max(last_.finished, seq);
}

LaneStatus WatchdogLane::status() const {
  std::lock_guard<std::mutex> lk(mu_);
  return last_;
}

std::optional<OverdueOp> WatchdogLane::overdue(Clock::time_point now, Clock::duration timeout) {
  std::lock_guard<std::mutex> lk(mu_);
  // Asynchronous ops finish in stream order: pop finished ones from the front.
  while (!pending_.empty() && pending_.front().done && pending_.front().done()) {
    last_.finished = std::max(last_.finished, pending_.front().info.seq);
    pending_.pop_front();
  }
  if (pending_.empty() || now - pending_.front().start < timeout) return std::nullopt;
  OverdueOp op;
  op.lane = index_;
  op.lane_name = name_;
  op.info = pending_.front().info;
  op.step = pending_.front().step;
  return op;
}

// ---- Watchdog ----

Watchdog::Watchdog(MPI_Comm parent, double timeout_s) : timeout_s_(timeout_s) {
  HPC_MPI_CHECK(MPI_Comm_dup(parent, &comm_));
  // A dead peer must not turn a side-channel call into a fatal error before we have reported.
  HPC_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  HPC_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  HPC_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  post_request_recv();
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  int fin = 0;
  MPI_Finalized(&fin);
  if (fin) return;
  std::lock_guard<std::mutex> lk(serve_mu_);
  if (request_recv_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&request_recv_);
    MPI_Wait(&request_recv_, MPI_STATUS_IGNORE);
  }
  for (auto& [buf, req] : replies_) MPI_Wait(&req, MPI_STATUS_IGNORE);  // eager-sized: local
  MPI_Comm_free(&comm_);
}

WatchdogLane& Watchdog::add_lane(const std::string& name) {
  std::lock_guard<std::mutex> lk(lanes_mu_);
  if (lanes_.size() >= kMaxLanes)
    throw Error("watchdog: more than " + std::to_string(kMaxLanes) + " lanes (adding '" + name + "')");
  int index = static_cast<int>(lanes_.size());
  lanes_.push_back(std::unique_ptr<WatchdogLane>(new WatchdogLane(index, name)));
  return *lanes_.back();
}

void Watchdog::add_abort_hook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lk(lanes_mu_);
  abort_hooks_.push_back(std::move(hook));
}

PeerStatus Watchdog::own_status() const {
  std::lock_guard<std::mutex> lk(lanes_mu_);
  PeerStatus s;
  s.rank = rank_;
  s.lanes = static_cast<int32_t>(lanes_.size());
  for (size_t i = 0; i < lanes_.size(); ++i) s.lane[i] = lanes_[i]->status();
  return s;
}

void Watchdog::post_request_recv() {
  MPI_Irecv(request_, 2, MPI_INT32_T, MPI_ANY_SOURCE, kRequestTag, comm_, &request_recv_);
}

void Watchdog::serve() {
  std::lock_guard<std::mutex> lk(serve_mu_);
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Test(&request_recv_, &flag, &st) != MPI_SUCCESS || !flag) break;
    int src = st.MPI_SOURCE;
    if (request_[0] == kReport) {
      int cur = reporter_.load();
      while ((cur < 0 || src < cur) && !reporter_.compare_exchange_weak(cur, src)) {
      }
      // Rank `src` is about to report a timeout and abort the job: leave this rank's record.
      FlightRecorder::get().dump("watchdog: rank " + std::to_string(src) + " reports a collective timeout");
    }
    auto buf = std::make_unique<PeerStatus>(own_status());
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Isend(buf.get(), sizeof(PeerStatus), MPI_BYTE, src, kReplyTagBase + request_[1], comm_, &req);
    replies_.emplace_back(std::move(buf), req);
    post_request_recv();
  }
  for (auto it = replies_.begin(); it != replies_.end();) {
    int flag = 0;
    MPI_Test(&it->second, &flag, MPI_STATUS_IGNORE);
    it = flag ? replies_.erase(it) : std::next(it);
  }
}

std::vector<std::optional<PeerStatus>> Watchdog::query(double wait_s, bool reporting) {
  int round = round_.fetch_add(1) % kRounds;
  int32_t request[2] = {reporting ? kReport : kQuery, round};
  std::vector<std::optional<PeerStatus>> out(size_);
  out[rank_] = own_status();
  std::vector<PeerStatus> answers(size_);
  std::vector<MPI_Request> recvs(size_, MPI_REQUEST_NULL), sends(size_, MPI_REQUEST_NULL);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Irecv(&answers[r], sizeof(PeerStatus), MPI_BYTE, r, kReplyTagBase + round, comm_, &recvs[r]);
    MPI_Isend(request, 2, MPI_INT32_T, r, kRequestTag, comm_, &sends[r]);
  }
  auto deadline = Clock::now() + to_duration(wait_s);
  int pending = size_ - 1;
  while (pending > 0 && Clock::now() < deadline) {
    serve();  // a peer may be asking us at the same time
    for (int r = 0; r < size_; ++r) {
      if (recvs[r] == MPI_REQUEST_NULL) continue;
      int flag = 0;
      if (MPI_Test(&recvs[r], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag) {
        out[r] = answers[r];
        recvs[r] = MPI_REQUEST_NULL;
        --pending;
      }
    }
    if (pending > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (int r = 0; r < size_; ++r) {
    if (recvs[r] != MPI_REQUEST_NULL) {  // no answer: withdraw the receive
      MPI_Cancel(&recvs[r]);
      MPI_Wait(&recvs[r], MPI_STATUS_IGNORE);
    }
    // A send to a dead peer may never complete; let MPI finish or drop it in the background.
    if (sends[r] != MPI_REQUEST_NULL) MPI_Request_free(&sends[r]);
  }
  return out;
}

void Watchdog::loop() {
  // Poll often enough that a report comes within ~5% of the deadline, and never busy-spin.
  auto poll = to_duration(std::clamp(timeout_s_ / 20, 0.01, 0.1));
  auto timeout = to_duration(timeout_s_);
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      if (cv_.wait_for(lk, poll, [&] { return stop_; })) return;
    }
    // A communicator kept past MPI_Finalize (e.g. a function-local static) must not touch MPI.
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    serve();
    std::optional<OverdueOp> op;
    {
      std::lock_guard<std::mutex> lk(lanes_mu_);
      auto now = Clock::now();
      for (auto& lane : lanes_)
        if ((op = lane->overdue(now, timeout))) break;
    }
    if (op) on_overdue(*op);
  }
}

void Watchdog::on_overdue(const OverdueOp& op) {
  // Answers take at most this long; a rank that saw another rank's report request waits this
  // long plus a margin for that rank's MPI_Abort before reporting itself.
  const double answer_wait = std::clamp(timeout_s_ / 2, 1.0, 10.0);
  const int other = reporter_.load();
  if (other >= 0 && other != rank_) {
    if (!deferred_since_) deferred_since_ = Clock::now();
    if (Clock::now() - *deferred_since_ < to_duration(2 * answer_wait + 5)) return;
  }
  auto peers = query(answer_wait, /*reporting=*/true);
  const int lowest = reporter_.load();
  if (lowest >= 0 && lowest < rank_ && !deferred_since_) {
    deferred_since_ = Clock::now();  // a lower rank is reporting the same hang
    return;
  }
  report_and_abort(op, peers);
}

void Watchdog::report_and_abort(const OverdueOp& op, const std::vector<std::optional<PeerStatus>>& peers) {
  OverdueOp o = op;
  o.deadline_s = timeout_s_;
  std::string line = "hpctrain: " + format_timeout_report(rank_, o, peers) + "\n";
  if (std::string note = hang_note(); !note.empty())
    line += "hpctrain: rank " + std::to_string(rank_) + ": " + note + "\n";
  if (std::string path = FlightRecorder::get().dump("watchdog: collective timeout on this rank"); !path.empty())
    line += "hpctrain: rank " + std::to_string(rank_) + ": flight recorder dumped to " + path +
            " (every rank that answered dumped too; read them with: hpctrain flight " +
            std::filesystem::path(path).parent_path().string() + ")\n";
  std::fflush(stdout);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lk(lanes_mu_);
    hooks = abort_hooks_;
  }
  for (auto& h : hooks) {
    try {
      h();
    } catch (...) {  // best effort: the job ends below either way
    }
  }
  if (World::initialized()) World::get().abort(kWatchdogExitCode);
  MPI_Abort(MPI_COMM_WORLD, kWatchdogExitCode);
  std::_Exit(kWatchdogExitCode);
}

}  // namespace hpctrain
