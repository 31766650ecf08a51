// StepStats: the trainer's running numbers (loss, throughput, data wait, comm-blocked time)
// per log interval and for the whole run.
//
// Contract: close_interval() is collective (one small allreduce of [loss sum, loss count] and
// every rank's three interval timings) so the loss printed by rank 0 is the global mean over the
// interval and rank 0 knows each rank's step time; the other timing figures are rank 0's.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <vector>

#include <nlohmann/json.hpp>

namespace hpctrain {

class Communicator;
struct DdpStepStats;

// One rank's interval, per optimizer step: wall time, time waiting for data, time blocked on
// gradient communication (the rest is compute).
struct RankInterval {
  double step_s = 0, data_wait_s = 0, comm_blocked_s = 0;
};

struct IntervalReport {
  double loss = 0, samples_per_s = 0, data_wait_pct = 0, comm_wait_pct = 0, step_s = 0;
  std::vector<RankInterval> ranks;  // indexed by rank
  // [{"step_s", "data_wait_s", "comm_blocked_s"}, ...]: the metrics record's "per_rank".
  nlohmann::json per_rank_json() const;
};

class StepStats {
 public:
  void start(double data_wait_total);
  void add_loss(const at::Tensor& loss);  // a micro-batch's (already weighted) loss
  void add_step(int64_t local_rows, const DdpStepStats& ddp);
  void set_data_wait(double data_wait_total) { data_wait_total_ = data_wait_total; }
  IntervalReport close_interval(Communicator& comm, int world);

  double mean_step_seconds() const;
  double last_loss() const { return last_loss_; }
  double overall_samples_per_s() const;
  double overall_data_wait_pct() const;
  double overall_comm_wait_pct() const;

 private:
  using clock = std::chrono::steady_clock;
  double elapsed() const;

  clock::time_point t0_, interval_t0_;
  at::Tensor loss_sum_;  // on the loss's device; read once per interval
  int64_t interval_steps_ = 0, steps_ = 0, rows_ = 0, interval_rows_ = 0;
  double data_wait_total_ = 0, data_wait_start_ = 0, interval_data_wait0_ = 0;
  double comm_wait_ = 0, interval_comm_wait_ = 0;
  double last_loss_ = 0;
  int world_ = 1;
};

}  // namespace hpctrain
