// FlightRecorder: a mutex-guarded ring of records (lookup by lane and sequence number from the
// newest end, where the op being started or ended almost always is), dumped as JSON through a
// temporary file and a rename; SIGUSR2 sets a flag that a small thread polls.
#include "comm/flight_recorder.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/guard.h"

namespace hpctrain {
namespace {

volatile std::sig_atomic_t g_usr2 = 0;
extern "C" void on_usr2(int) { g_usr2 = 1; }

double now_s() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

int64_t dtype_bytes(const std::string& d) {
  if (d == "float64" || d == "int64" || d == "Double" || d == "Long") return 8;
  if (d == "float32" || d == "int32" || d == "Float" || d == "Int") return 4;
  if (d == "float16" || d == "bfloat16" || d == "int16" || d == "Half" || d == "BFloat16" || d == "Short") return 2;
  if (d == "uint8" || d == "int8" || d == "bool" || d == "Byte" || d == "Char" || d == "Bool") return 1;
  return 0;  // unknown: bytes stays 0
}

}  // namespace

FlightRecorder& FlightRecorder::get() {
  static FlightRecorder r;
  return r;
}

FlightRecorder::~FlightRecorder() {
  {
    std::lock_guard<std::mutex> lk(thread_mu_);
    stop_ = true;
  }
  thread_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

const char* FlightRecorder::state_name(State s) {
  switch (s) {
    case State::kEnqueued: return "enqueued";
    case State::kStarted: return "started";
    case State::kDone: return "done";
    case State::kFailed: return "failed";
  }
  return "?";
}

void FlightRecorder::configure(int64_t capacity, std::string dir, int rank, int world, std::string job) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    ring_.assign(size_t(std::max<int64_t>(capacity, 0)), Record{});
    recorded_ = 0;
    dir_ = std::move(dir);
    job_ = std::move(job);
    rank_ = rank;
    world_ = world;
    capacity_.store(std::max<int64_t>(capacity, 0));
  }
  if (capacity <= 0) return;
  add_fatal_error_hook([](const std::string& what) { FlightRecorder::get().dump("fatal error: " + what); });
  struct sigaction sa {};
  sa.sa_handler = on_usr2;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR2, &sa, nullptr);
  std::lock_guard<std::mutex> lk(thread_mu_);
  if (!thread_.joinable()) thread_ = std::thread([this] { poll_signal(); });
}

void FlightRecorder::poll_signal() {
  std::unique_lock<std::mutex> lk(thread_mu_);
  while (!thread_cv_.wait_for(lk, std::chrono::milliseconds(100), [&] { return stop_; })) {
    if (!g_usr2) continue;
    g_usr2 = 0;
    lk.unlock();
    std::string path = dump("SIGUSR2");
    if (!path.empty()) std::fprintf(stderr, "hpctrain: rank %d: flight recorder dumped to %s\n", rank_, path.c_str());
    lk.lock();
  }
}

FlightRecorder::Record* FlightRecorder::find(const std::string& lane, uint64_t seq) {
  const uint64_t cap = ring_.size();
  for (uint64_t k = 0; k < std::min<uint64_t>(recorded_, cap); ++k) {
    Record& r = ring_[(recorded_ - 1 - k) % cap];
    if (r.seq == seq && r.lane == lane) return &r;
    if (r.lane == lane && r.seq < seq) return nullptr;  // older than the one asked for
  }
  return nullptr;
}

void FlightRecorder::enqueue(const std::string& lane, const OpInfo& info) {
  if (!enabled()) return;
  const double t = now_s();
  std::lock_guard<std::mutex> lk(mu_);
  if (ring_.empty()) return;
  Record& r = ring_[recorded_ % ring_.size()];
  r.lane = lane;
  r.op = info.op;
  r.tag = info.tag;
  r.dtype = info.dtype;
  r.seq = info.seq;
  r.numel = info.numel;
  r.bytes = info.numel * dtype_bytes(info.dtype);
  r.enqueue_s = t;
  r.start_s = r.end_s = -1;
  r.state = State::kEnqueued;
  ++recorded_;
}

void FlightRecorder::start(const std::string& lane, uint64_t seq) {
  if (!enabled()) return;
  const double t = now_s();
  std::lock_guard<std::mutex> lk(mu_);
  if (Record* r = find(lane, seq)) r->start_s = t, r->state = State::kStarted;
}

void FlightRecorder::end(const std::string& lane, uint64_t seq, bool ok) {
  if (!enabled()) return;
  const double t = now_s();
  std::lock_guard<std::mutex> lk(mu_);
  if (Record* r = find(lane, seq)) r->end_s = t, r->state = ok ? State::kDone : State::kFailed;
}

std::vector<FlightRecorder::Record> FlightRecorder::snapshot() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<Record> out;
  const uint64_t cap = ring_.size();
  if (!cap) return out;
  const uint64_t n = std::min<uint64_t>(recorded_, cap);
  for (uint64_t k = recorded_ - n; k < recorded_; ++k) out.push_back(ring_[k % cap]);
  return out;
}

std::string FlightRecorder::dump(const std::string& reason) noexcept {
  try {
    if (!enabled()) return "";
    std::vector<Record> recs = snapshot();
    nlohmann::json j;
    std::string dir, job;
    int rank, world;
    uint64_t recorded;
    {
      std::lock_guard<std::mutex> lk(mu_);
      dir = dir_, job = job_, rank = rank_, world = world_, recorded = recorded_;
    }
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    j["job"] = job;
    j["rank"] = rank;
    j["world_size"] = world;
    j["host"] = host;
    j["pid"] = int64_t(getpid());
    j["reason"] = reason;
    j["dumped_at"] = now_s();
    j["capacity"] = capacity_.load();
    j["recorded"] = recorded;
    nlohmann::json arr = nlohmann::json::array();
    for (const Record& r : recs)
      arr.push_back({{"lane", r.lane},
                     {"seq", r.seq},
                     {"op", r.op},
                     {"tag", r.tag},
                     {"dtype", r.dtype},
                     {"numel", r.numel},
                     {"bytes", r.bytes},
                     {"enqueue_s", r.enqueue_s},
                     {"start_s", r.start_s},
                     {"end_s", r.end_s},
                     {"state", state_name(r.state)}});
    j["records"] = std::move(arr);
    namespace fs = std::filesystem;
    const fs::path d = fs::path(dir.empty() ? "." : dir) / "flight";
    std::error_code ec;
    fs::create_directories(d, ec);
    const fs::path final_path = d / ("rank-" + std::to_string(rank) + ".json");
    const fs::path tmp = d / ("rank-" + std::to_string(rank) + ".json.tmp." + std::to_string(getpid()));
    {
      std::ofstream out(tmp);
      out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      if (!out) return "";
    }
    fs::rename(tmp, final_path, ec);
    if (ec) return "";
    return final_path.string();
  } catch (...) {
    return "";
  }
}

}  // namespace hpctrain
