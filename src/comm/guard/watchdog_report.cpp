// format_timeout_report sorts the ranks by their lane status at the overdue op's sequence
// number: reached it, in a different collective there (a desync), behind, or silent.
#include "comm/guard/watchdog_report.h"

#include <cmath>

namespace hpctrain {
namespace {

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? sep : "") + parts[i];
  return s;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), s >= 10 || s == std::floor(s) ? "%.0f s" : "%.1f s", s);
  return buf;
}

}  // namespace

std::string format_timeout_report(int rank, const OverdueOp& op,
                                  const std::vector<std::optional<PeerStatus>>& by_rank) {
  const uint64_t seq = op.info.seq;
  const Fingerprint mine = make_fingerprint(op.info);
  std::vector<std::string> reached, elsewhere, behind, silent;
  for (int r = 0; r < static_cast<int>(by_rank.size()); ++r) {
    const auto& p = by_rank[r];
    if (!p || op.lane >= p->lanes) {
      silent.push_back(std::to_string(r));
      continue;
    }
    const LaneStatus& l = p->lane[op.lane];
    if (l.started > seq || (l.started == seq && same_collective(l.last, mine))) {
      reached.push_back(std::to_string(r));
    } else if (l.started == seq) {
      // Same position in the sequence, different call: a desync that hangs.
      elsewhere.push_back(std::to_string(r) + " (" + describe(l.last) + ")");
    } else if (l.started == 0) {
      behind.push_back(std::to_string(r) + " (no collective started yet)");
    } else {
      behind.push_back(std::to_string(r) + " (last op " + describe(l.last) +
                       (l.finished >= l.started ? ", finished" : ", still running") +
                       (l.step >= 0 ? ", step " + std::to_string(l.step) : "") + ")");
    }
  }
  std::string what = op.lane_name == "mpi" ? "collective " : op.lane_name + " collective ";
  std::string s = "rank " + std::to_string(rank) + ": " + what + op.info.describe();
  if (op.step >= 0) s += " at step " + std::to_string(op.step);
  s += " timed out after " + seconds(op.deadline_s);
  s += "; ranks that reached it: " + (reached.empty() ? std::string("none") : join(reached, ","));
  if (!elsewhere.empty())
    s += "; ranks in a different collective at #" + std::to_string(seq) + ": " + join(elsewhere, ", ");
  if (!behind.empty()) s += "; ranks that did not: " + join(behind, ", ");
  if (!silent.empty()) s += "; ranks that did not answer (dead, or hung with their watchdog): " + join(silent, ",");
  return s;
}

}  // namespace hpctrain
