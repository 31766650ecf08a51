// StragglerWatch: the trainer's per-interval straggler report (progress line, metrics record,
// summary, watchdog note, trace mark) built on classify_straggler (metrics/straggler.h).
//
// Contract:
// - observe() runs on every rank after each interval's close (every rank has every rank's split
//   from that one collective); it never communicates. A finding is reported only once the same
//   rank is found in two consecutive intervals (a single noisy interval says nothing), so a
//   rank that is slow from the start is named at the second log interval.
// - Every observed interval's split becomes the watchdog's hang note (comm/guard/hang_note.h).
// - With --trace, the straggler rank records a span "straggler: ..." over the interval (tid 3).
// - A slow-link finding's record also has "link": {"to", "to_host", "probe_ms",
//   "median_probe_ms", "probe_bytes"} (diag/link_probe.h).
// - summary(): {"rank", "host", "intervals", "of"} for the rank reported most often (the lower
//   rank on a tie), or null when none was reported.
// - threshold 0 turns it off: observe() returns nothing and sets no note.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/straggler.h"

namespace hpctrain {

class Communicator;

// Collective: every rank's hostname, indexed by rank.
std::vector<std::string> gather_hostnames(Communicator& comm, const std::string& mine);

class StragglerWatch {
 public:
  StragglerWatch(double threshold, std::vector<std::string> hosts, int rank);
  bool enabled() const { return threshold_ > 0; }
  // The finding to report for the interval that ended now (it began at the previous call, or at
  // construction), if any.
  std::optional<StragglerFinding> observe(const std::vector<RankSplit>& ranks);
  // observe(), then on a finding: appends the progress text to `line_note` and sets
  // rec["straggler"] to record().
  void annotate(const std::vector<RankSplit>& ranks, std::string& line_note, nlohmann::json& rec);
  // "slowest: rank 1 on node1 (+12.4 ms/step, compute 61.0 ms vs median 45.0 ms)"
  std::string progress_text(const StragglerFinding& f) const;
  // The metrics record's "straggler" object.
  nlohmann::json record(const StragglerFinding& f, const std::vector<RankSplit>& ranks) const;
  nlohmann::json summary() const;
  const std::string& host(int rank) const;

 private:
  double threshold_;
  std::vector<std::string> hosts_;
  int rank_;
  double last_us_;      // Tracer clock at the previous interval's end
  int candidate_ = -1;  // the rank found in the previous interval (-1: none)
  int intervals_ = 0;
  std::map<int, int> reported_;  // rank -> intervals in which it was reported
};

}  // namespace hpctrain
