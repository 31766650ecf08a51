// FlightRecorder: a mutex-guarded ring of records (lookup by lane and sequence number from the
// newest end, where the op being started or ended almost always is), dumped as JSON through a
// temporary file and a rename on a detached thread the caller waits for at most
// kDumpDeadlineS; SIGUSR2 sets a flag that a small thread polls.
#include "comm/guard/flight_recorder.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "runtime/guard.h"

namespace hpctrain {
namespace {

volatile std::sig_atomic_t g_usr2 = 0;
volatile std::sig_atomic_t g_on = 0;  // a recorder is on: SIGUSR2 asks it for a dump
extern "C" void on_usr2(int) {
  if (g_on) {
    g_usr2 = 1;
    return;
  }
  static const char msg[] =
      "hpctrain: SIGUSR2 ignored: no flight recorder in this process (--flight-records 0, or a command "
      "other than train)\n";
  const int saved = errno;
  ssize_t n = ::write(2, msg, sizeof msg - 1);
  (void)n;
  errno = saved;
}

// Writes `text` to `dir`/`name` through `name`.tmp.<pid> and a rename. Returns "" or why not;
// a failure leaves no temporary file.
std::string write_atomically(const std::filesystem::path& dir, const std::string& name, const std::string& text) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return "cannot create " + dir.string() + ": " + ec.message();
  const fs::path final_path = dir / name;
  const fs::path tmp = dir / (name + ".tmp." + std::to_string(getpid()));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot create " + tmp.string() + ": " + std::strerror(errno);
  std::string why;
  for (size_t off = 0; off < text.size() && why.empty();) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) why = "cannot write " + tmp.string() + ": " + std::strerror(n < 0 ? errno : EIO);
    else off += size_t(n);
  }
  if (why.empty() && ::fsync(fd) != 0) why = "cannot write " + tmp.string() + ": " + std::strerror(errno);
  if (::close(fd) != 0 && why.empty()) why = "cannot write " + tmp.string() + ": " + std::strerror(errno);
  if (why.empty() && ::rename(tmp.c_str(), final_path.c_str()) != 0)
    why = "cannot rename " + tmp.string() + " to " + final_path.string() + ": " + std::strerror(errno);
  if (!why.empty()) ::unlink(tmp.c_str());
  return why;
}

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

void FlightRecorder::catch_dump_signal() {
  struct sigaction sa {};
  sa.sa_handler = on_usr2;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR2, &sa, nullptr);
}

void FlightRecorder::configure(int64_t capacity, std::string dir, int rank, int world, Job job) {
  catch_dump_signal();
  g_on = 0;
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
  g_on = 1;
  std::lock_guard<std::mutex> lk(thread_mu_);
  if (!hooked_)
    add_fatal_error_hook([](const std::string& what) { FlightRecorder::get().dump("fatal error: " + what); });
  hooked_ = true;
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
  int rank = 0;
  try {
    if (!enabled()) return "";
    std::vector<Record> recs = snapshot();
    nlohmann::json j;
    std::string dir;
    Job job;
    int world;
    uint64_t recorded;
    {
      std::lock_guard<std::mutex> lk(mu_);
      dir = dir_, job = job_, rank = rank_, world = world_, recorded = recorded_;
    }
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    j["job"] = job.id;
    j["restart"] = job.restart;
    j["started_at"] = job.started_at;
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
    fs::path d = fs::path(dir.empty() ? "." : dir) / "flight";
    if (!job.id.empty()) d /= job.id;
    const std::string name = "rank-" + std::to_string(rank) + ".json";
    // Written on a thread of its own: a hung file system must not hold the caller (the abort
    // after a fatal error, the watchdog's report) past the deadline. The thread owns what it
    // touches, so it may outlive this call and even the recorder.
    struct Outcome {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      std::string why;
    };
    auto out = std::make_shared<Outcome>();
    std::thread([out, d, name, text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"] {
      std::string why;
      try {
        why = write_atomically(d, name, text);
      } catch (const std::exception& e) {
        why = e.what();
      }
      std::lock_guard<std::mutex> lk(out->mu);
      out->why = std::move(why);
      out->done = true;
      out->cv.notify_all();
    }).detach();
    std::unique_lock<std::mutex> lk(out->mu);
    if (!out->cv.wait_for(lk, std::chrono::duration<double>(kDumpDeadlineS), [&] { return out->done; })) {
      std::fprintf(stderr,
                   "hpctrain: rank %d: flight recorder: the dump to %s did not finish within %.0f s (a hung file "
                   "system?); going on without it\n",
                   rank, (d / name).c_str(), kDumpDeadlineS);
      return "";
    }
    if (!out->why.empty()) {
      std::fprintf(stderr, "hpctrain: rank %d: flight recorder: no dump (%s): %s\n", rank, reason.c_str(),
                   out->why.c_str());
      return "";
    }
    return (d / name).string();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hpctrain: rank %d: flight recorder: no dump: %s\n", rank, e.what());
    return "";
  } catch (...) {
    return "";
  }
}

}  // namespace hpctrain
