// StepStats: the trainer's running numbers (loss, throughput, data wait, comm-blocked time)
// per log interval and for the whole run.
//
// Contract: close_interval() is collective: one small allreduce of [loss sum, loss count] and a
// slot per rank that only that rank fills (so the sum is an allgather of every rank's interval
// split: step, data wait, optimizer, comm-blocked, wait inside collectives, and a link probe,
// diag/link_probe.h). The loss printed by
// rank 0 is the global mean over the interval and every rank knows every rank's split (the
// straggler report); the other timing figures are this rank's. No other collective is added.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/straggler.h"

namespace hpctrain {

class Communicator;
struct DdpStepStats;

// One rank's interval, per optimizer step: wall time, data wait, optimizer, time blocked on
// gradient communication, and time inside collectives (metrics/straggler.h).
using RankInterval = RankSplit;

struct IntervalReport {
  double loss = 0, samples_per_s = 0, data_wait_pct = 0, comm_wait_pct = 0, step_s = 0;
  std::vector<RankInterval> ranks;  // indexed by rank
  // [{"step_s", "data_wait_s", "compute_s", "optimizer_s", "comm_blocked_s", "wait_s"}, ...]:
  // the metrics record's "per_rank".
  nlohmann::json per_rank_json() const;
};

class StepStats {
 public:
  void start(double data_wait_total);
  void add_loss(const at::Tensor& loss);  // a micro-batch's (already weighted) loss
  void add_step(int64_t local_rows, const DdpStepStats& ddp);
  void add_optimizer(double seconds) { interval_optimizer_ += seconds; }
  void set_data_wait(double data_wait_total) { data_wait_total_ = data_wait_total; }
  // `link_probe` (may be empty; collective when given: every rank passes one) runs after the
  // interval's own figures are taken, and its result (this rank's outbound link time, 0: none)
  // is carried to every rank. Neither the probe nor this allreduce (in which ranks that did not
  // probe wait for those that did) counts in any interval's step time or collective wait.
  IntervalReport close_interval(Communicator& comm, int world, const std::function<double()>& link_probe = {});

  double mean_step_seconds() const;
  double last_loss() const { return last_loss_; }
  double overall_samples_per_s() const;
  double overall_data_wait_pct() const;
  double overall_comm_wait_pct() const;
  // Gradient bytes this rank handed to collectives over the run (DdpStepStats::bytes_reduced).
  int64_t bytes_reduced() const { return bytes_reduced_; }

 private:
  using clock = std::chrono::steady_clock;
  double elapsed() const;

  clock::time_point t0_, interval_t0_;
  at::Tensor loss_sum_;  // on the loss's device; read once per interval
  int64_t interval_steps_ = 0, steps_ = 0, rows_ = 0, interval_rows_ = 0, bytes_reduced_ = 0;
  double data_wait_total_ = 0, data_wait_start_ = 0, interval_data_wait0_ = 0;
  double comm_wait_ = 0, interval_comm_wait_ = 0, interval_optimizer_ = 0;
  double interval_wait0_ = 0;  // CollectiveWaitMeter total at the interval's start
  double last_loss_ = 0;
  int world_ = 1;
};

}  // namespace hpctrain
