// Straggler classification: which rank makes the others wait, what it costs, and why.
//
// Contract (a pure function over one log interval's per-rank step split; no I/O, no MPI):
// - Each rank's `wait_s` is the time per step it spent inside collectives, from the moment an
//   op could start until its data arrived (comm/guard/wait_meter.h). The last rank to arrive waits
//   least, so the candidate is the rank with the smallest wait, and the others' median wait
//   minus its wait is what it costs the job per step. No clocks are compared across ranks.
// - A finding is made only when that cost exceeds `threshold` x the median step time and
//   kMinStragglerCostS, 2 ms (threshold <= 0, fewer than 2 ranks, or an interval without steps:
//   never). The floor: with steps of a few ms, scheduler jitter on a shared node moves the
//   waits by a few hundred us per step (a balanced 4 ms-step mlp run was once named at 5%).
// - The cause compares the rank's own split with the others' medians:
//   `data` when its extra data wait explains at least half the cost (and more than its extra
//   compute), `compute` when its extra compute (step minus data wait minus comm-blocked:
//   forward, backward and optimizer) does; `comm` when neither explains even a quarter of it
//   (it computes and loads as fast as the others, yet they wait for its data: its messages
//   travel slowly); `unknown` otherwise.
// - A slow link (diag/link_probe.h) makes every rank wait alike, so the waits name no one.
//   Ranks that probed their outbound link to another host carry `link_s`. When the slowest probe
//   took >= kLinkRatio x the other probes' median and kMinLinkExcessS more, that rank's link is
//   slow; its cost is the median wait in collectives times the share of the probe the link
//   added, (1 - median / slowest): what the others' link speed would have saved. It is reported
//   (cause `comm`, with the link's figures) under the same threshold and floor, unless the
//   waits name a rank slow for `data` or `compute` (a slow rank makes the others wait more than
//   a slow link does, and is the thing to fix first).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hpctrain {

// One rank's interval, per optimizer step, in seconds.
struct RankSplit {
  double step_s = 0;          // wall time
  double data_wait_s = 0;     // waiting for the loader
  double optimizer_s = 0;     // unscale, clipping, optimizer step, zero_grad
  double comm_blocked_s = 0;  // the training thread blocked on gradient communication
  double wait_s = 0;          // inside collectives (comm thread), see above
  double link_s = 0;          // its outbound link probe to the next rank's host (0: none)
  // The training thread's own work: forward, backward and optimizer.
  double compute_s() const;
};

enum class StragglerCause { kData, kCompute, kComm, kUnknown };
const char* to_string(StragglerCause c);

struct StragglerFinding {
  int rank = -1;
  double cost_s = 0;  // per step: the others' median wait minus this rank's
  StragglerCause cause = StragglerCause::kUnknown;
  // The figure that names the cause, this rank's and the others' median, per step (data: data
  // wait; compute: compute; comm and unknown: wait in collectives).
  double value_s = 0, median_s = 0;
  // A slow link (cause comm): the rank it leads to; value_s/median_s are then the probe's time
  // on this link and the other probed links' median.
  int link_to = -1;
};

constexpr double kMinStragglerCostS = 2e-3;  // 2 ms per step
constexpr double kLinkRatio = 3.0;           // a probe this many times the others' median
constexpr double kMinLinkExcessS = 1e-3;     // and at least this much longer

std::optional<StragglerFinding> classify_straggler(const std::vector<RankSplit>& ranks, double threshold);

// "rank 1 on node1 (+12.4 ms/step, compute 61.0 ms vs median 45.0 ms)"; a slow link:
// "rank 1 on node1 (+52.0 ms/step, comm: its link to rank 0 on node0 took 13.1 ms per 256 KiB
// vs median 0.4 ms)"
std::string describe_straggler(const StragglerFinding& f, const std::string& host, const std::string& link_host = "");
// [{"step_s", "data_wait_s", "compute_s", "optimizer_s", "comm_blocked_s", "wait_s", "link_s"}, ...]
nlohmann::json splits_json(const std::vector<RankSplit>& ranks);
// "step/data-wait/compute/comm-blocked/collective-wait ms per step: r0 45.1/0.2/40.3/4.6/5.0, r1 ...";
// a rank that probed its link also gets " (link probe 8.57 ms)".
std::string splits_line(const std::vector<RankSplit>& ranks);

}  // namespace hpctrain
