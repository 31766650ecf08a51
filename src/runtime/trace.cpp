// Tracer: spans kept in memory under a mutex, timestamps in system_clock microseconds;
// events_json adds a process_name metadata event so the viewer names each pid "rank R".
#include "runtime/trace.h"

#include <chrono>

#include <nlohmann/json.hpp>

namespace hpctrain {

Tracer& Tracer::get() {
  static Tracer t;
  return t;
}

void Tracer::enable(int rank) {
  rank_ = rank;
  enabled_.store(true);
}

double Tracer::now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void Tracer::record(std::string name, const char* cat, double t0_us, double t1_us, int tid) {
  std::lock_guard<std::mutex> lk(mu_);
  events_.push_back({std::move(name), cat, t0_us, t1_us, tid});
}

std::string Tracer::events_json() const {
  std::lock_guard<std::mutex> lk(mu_);
  nlohmann::json arr = nlohmann::json::array();
  arr.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", rank_}, {"args", {{"name", "rank " + std::to_string(rank_)}}}});
  for (auto& e : events_)
    arr.push_back({{"name", e.name},
                   {"cat", e.cat},
                   {"ph", "X"},
                   {"pid", rank_},
                   {"tid", e.tid},
                   {"ts", e.t0},
                   {"dur", e.t1 - e.t0}});
  return arr.dump();
}

TraceSpan::TraceSpan(std::string name, const char* cat, int tid) : on_(Tracer::get().enabled()), cat_(cat), tid_(tid) {
  if (!on_) return;
  name_ = std::move(name);
  t0_ = Tracer::now_us();
}

TraceSpan::~TraceSpan() {
  if (on_) Tracer::get().record(std::move(name_), cat_, t0_, Tracer::now_us(), tid_);
}

}  // namespace hpctrain
