// StragglerWatch: turns each interval's per-rank split into the straggler report's line,
// record and watchdog note, and keeps the run's summary of who was slow and why.
#include "metrics/straggler_watch.h"

#include <ATen/ATen.h>

#include <cstring>

#include "comm/communicator.h"
#include "comm/guard/hang_note.h"
#include "diag/link_probe.h"
#include "runtime/trace.h"

namespace hpctrain {

std::vector<std::string> gather_hostnames(Communicator& comm, const std::string& mine) {
  at::Tensor bytes = at::empty({static_cast<int64_t>(mine.size())}, at::kByte);
  if (!mine.empty()) std::memcpy(bytes.data_ptr(), mine.data(), mine.size());
  std::vector<at::Tensor> parts{bytes};
  if (comm.size() > 1) comm.allgather(bytes, &parts, "straggler.hosts")->wait();
  std::vector<std::string> out;
  for (const at::Tensor& p : parts)
    out.emplace_back(static_cast<const char*>(p.data_ptr()), static_cast<size_t>(p.numel()));
  return out;
}

StragglerWatch::StragglerWatch(double threshold, std::vector<std::string> hosts, int rank)
    : threshold_(threshold), hosts_(std::move(hosts)), rank_(rank), last_us_(Tracer::now_us()) {}

const std::string& StragglerWatch::host(int rank) const {
  static const std::string unknown = "?";
  return rank >= 0 && rank < static_cast<int>(hosts_.size()) ? hosts_[rank] : unknown;
}

std::optional<StragglerFinding> StragglerWatch::observe(const std::vector<RankSplit>& ranks) {
  if (!enabled()) return std::nullopt;
  const double t0_us = last_us_, t1_us = last_us_ = Tracer::now_us();
  set_hang_note("last log interval, " + splits_line(ranks));
  ++intervals_;
  std::optional<StragglerFinding> f = classify_straggler(ranks, threshold_);
  int found = f ? f->rank : -1;
  bool confirmed = f && found == candidate_;
  candidate_ = found;
  if (!confirmed) return std::nullopt;
  ++reported_[f->rank];
  if (f->rank == rank_ && Tracer::get().enabled())
    Tracer::get().record("straggler: " + describe_straggler(*f, host(f->rank), f->link_to >= 0 ? host(f->link_to) : ""),
                         "straggler", t0_us, t1_us, 3);
  return f;
}

void StragglerWatch::annotate(const std::vector<RankSplit>& ranks, std::string& line_note, nlohmann::json& rec) {
  std::optional<StragglerFinding> f = observe(ranks);
  if (!f) return;
  line_note += (line_note.empty() ? "" : "; ") + progress_text(*f);
  rec["straggler"] = record(*f, ranks);
}

std::string StragglerWatch::progress_text(const StragglerFinding& f) const {
  return "slowest: " + describe_straggler(f, host(f.rank), f.link_to >= 0 ? host(f.link_to) : "");
}

nlohmann::json StragglerWatch::record(const StragglerFinding& f, const std::vector<RankSplit>& ranks) const {
  nlohmann::json j = {{"rank", f.rank},
                      {"host", host(f.rank)},
                      {"cost_ms_per_step", f.cost_s * 1e3},
                      {"cause", to_string(f.cause)},
                      {"per_rank", splits_json(ranks)}};
  if (f.link_to >= 0)
    j["link"] = {{"to", f.link_to},
                 {"to_host", host(f.link_to)},
                 {"probe_ms", f.value_s * 1e3},
                 {"median_probe_ms", f.median_s * 1e3},
                 {"probe_bytes", LinkProbe::kBytes}};
  return j;
}

nlohmann::json StragglerWatch::summary() const {
  int best = -1, n = 0;
  for (const auto& [r, k] : reported_)
    if (k > n) best = r, n = k;  // std::map: ascending ranks, so a tie keeps the lower rank
  if (best < 0) return nullptr;
  return {{"rank", best}, {"host", host(best)}, {"intervals", n}, {"of", intervals_}};
}

}  // namespace hpctrain
