// Straggler classification: slow_rank takes the rank with the least wait in collectives and
// compares its split with the others' medians; slow_link looks at the link probes. A data or
// compute finding wins over a slow link.
#include "metrics/straggler.h"

#include <algorithm>
#include <cstdio>

#include "diag/link_probe.h"

namespace hpctrain {
namespace {

constexpr int64_t kLinkProbeBytes = LinkProbe::kBytes;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The median of `field` over every rank but `skip`.
template <class F>
double others_median(const std::vector<RankSplit>& ranks, int skip, F field) {
  std::vector<double> v;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r)
    if (r != skip) v.push_back(field(ranks[r]));
  return median(std::move(v));
}

}  // namespace

double RankSplit::compute_s() const { return std::max(0.0, step_s - data_wait_s - comm_blocked_s); }

const char* to_string(StragglerCause c) {
  switch (c) {
    case StragglerCause::kData: return "data";
    case StragglerCause::kCompute: return "compute";
    case StragglerCause::kComm: return "comm";
    case StragglerCause::kUnknown: return "unknown";
  }
  return "unknown";
}

namespace {

// The slow outbound link among the probed ones, if any (see the header).
std::optional<StragglerFinding> slow_link(const std::vector<RankSplit>& ranks, double min_cost) {
  const int n = static_cast<int>(ranks.size());
  int s = -1, probed = 0;
  for (int r = 0; r < n; ++r) {
    if (ranks[r].link_s <= 0) continue;
    ++probed;
    if (s < 0 || ranks[r].link_s > ranks[s].link_s) s = r;
  }
  if (probed < 2) return std::nullopt;
  std::vector<double> others, waits;
  for (int r = 0; r < n; ++r) {
    if (r != s && ranks[r].link_s > 0) others.push_back(ranks[r].link_s);
    waits.push_back(ranks[r].wait_s);
  }
  const double m = median(others), slow = ranks[s].link_s;
  if (slow < kLinkRatio * m || slow - m < kMinLinkExcessS) return std::nullopt;
  StragglerFinding f;
  f.rank = s;
  f.cause = StragglerCause::kComm;
  f.cost_s = median(waits) * (1 - m / slow);
  f.value_s = slow;
  f.median_s = m;
  f.link_to = (s + 1) % n;
  if (f.cost_s <= min_cost) return std::nullopt;
  return f;
}

// The rank the others wait for, from the waits alone.
std::optional<StragglerFinding> slow_rank(const std::vector<RankSplit>& ranks, double min_cost);

}  // namespace

std::optional<StragglerFinding> classify_straggler(const std::vector<RankSplit>& ranks, double threshold) {
  const int n = static_cast<int>(ranks.size());
  if (threshold <= 0 || n < 2) return std::nullopt;
  for (const RankSplit& r : ranks)
    if (r.step_s <= 0) return std::nullopt;  // a rank without steps in this interval
  std::vector<double> steps;
  for (const RankSplit& r : ranks) steps.push_back(r.step_s);
  const double min_cost = std::max(threshold * median(steps), kMinStragglerCostS);
  std::optional<StragglerFinding> rank = slow_rank(ranks, min_cost);
  if (rank && (rank->cause == StragglerCause::kData || rank->cause == StragglerCause::kCompute)) return rank;
  std::optional<StragglerFinding> link = slow_link(ranks, min_cost);
  return link ? link : rank;
}

namespace {

std::optional<StragglerFinding> slow_rank(const std::vector<RankSplit>& ranks, double min_cost) {
  const int n = static_cast<int>(ranks.size());
  int s = 0;
  for (int r = 1; r < n; ++r)
    if (ranks[r].wait_s < ranks[s].wait_s) s = r;
  auto wait = [](const RankSplit& r) { return r.wait_s; };
  auto data = [](const RankSplit& r) { return r.data_wait_s; };
  auto compute = [](const RankSplit& r) { return r.compute_s(); };
  StragglerFinding f;
  f.rank = s;
  f.cost_s = others_median(ranks, s, wait) - ranks[s].wait_s;
  if (f.cost_s <= min_cost) return std::nullopt;
  const double data_med = others_median(ranks, s, data), compute_med = others_median(ranks, s, compute);
  const double extra_data = ranks[s].data_wait_s - data_med;
  const double extra_compute = ranks[s].compute_s() - compute_med;
  if (extra_data >= 0.5 * f.cost_s && extra_data >= extra_compute) {
    f.cause = StragglerCause::kData;
    f.value_s = ranks[s].data_wait_s;
    f.median_s = data_med;
  } else if (extra_compute >= 0.5 * f.cost_s) {
    f.cause = StragglerCause::kCompute;
    f.value_s = ranks[s].compute_s();
    f.median_s = compute_med;
  } else {
    f.cause = std::max(extra_data, extra_compute) < 0.25 * f.cost_s ? StragglerCause::kComm : StragglerCause::kUnknown;
    f.value_s = ranks[s].wait_s;
    f.median_s = others_median(ranks, s, wait);
  }
  return f;
}

}  // namespace

std::string describe_straggler(const StragglerFinding& f, const std::string& host, const std::string& link_host) {
  if (f.link_to >= 0) {
    char buf[320];
    std::snprintf(
        buf, sizeof(buf),
        "rank %d on %s (+%.1f ms/step, comm: its link to rank %d%s%s took %.1f ms per %lld KiB vs median %.1f ms)",
        f.rank, host.c_str(), f.cost_s * 1e3, f.link_to, link_host.empty() ? "" : " on ", link_host.c_str(),
        f.value_s * 1e3, static_cast<long long>(kLinkProbeBytes >> 10), f.median_s * 1e3);
    return buf;
  }
  const char* what = "wait in collectives";
  if (f.cause == StragglerCause::kData) what = "data-wait";
  if (f.cause == StragglerCause::kCompute) what = "compute";
  char buf[256];
  std::snprintf(buf, sizeof(buf), "rank %d on %s (+%.1f ms/step, %s%s %.1f ms vs median %.1f ms)", f.rank, host.c_str(),
                f.cost_s * 1e3,
                f.cause == StragglerCause::kComm      ? "comm: its "
                : f.cause == StragglerCause::kUnknown ? "cause unknown, "
                                                      : "",
                what, f.value_s * 1e3, f.median_s * 1e3);
  return buf;
}

nlohmann::json splits_json(const std::vector<RankSplit>& ranks) {
  nlohmann::json a = nlohmann::json::array();
  for (const RankSplit& r : ranks)
    a.push_back({{"step_s", r.step_s},
                 {"data_wait_s", r.data_wait_s},
                 {"compute_s", r.compute_s()},
                 {"optimizer_s", r.optimizer_s},
                 {"comm_blocked_s", r.comm_blocked_s},
                 {"wait_s", r.wait_s},
                 {"link_s", r.link_s}});
  return a;
}

std::string splits_line(const std::vector<RankSplit>& ranks) {
  std::string out = "step/data-wait/compute/comm-blocked/collective-wait ms per step:";
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankSplit& k = ranks[r];
    char buf[128];
    std::snprintf(buf, sizeof(buf), "%s r%zu %.1f/%.1f/%.1f/%.1f/%.1f", r ? "," : "", r, k.step_s * 1e3,
                  k.data_wait_s * 1e3, k.compute_s() * 1e3, k.comm_blocked_s * 1e3, k.wait_s * 1e3);
    out += buf;
    if (k.link_s > 0) {
      std::snprintf(buf, sizeof(buf), " (link probe %.2f ms)", k.link_s * 1e3);
      out += buf;
    }
  }
  return out;
}

}  // namespace hpctrain
