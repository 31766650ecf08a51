// StepStats: per interval one fp64 allreduce of [loss sum, steps, 6 slots per rank], each rank
// filling only its own slots, so the sum gathers every rank's split. The wait meter's start is
// reset after that allreduce, so its wait counts in no interval.
#include "metrics/step_stats.h"

#include <ATen/ATen.h>

#include "comm/blocking.h"
#include "comm/communicator.h"
#include "comm/guard/wait_meter.h"
#include "ddp/ddp.h"

namespace hpctrain {

void StepStats::start(double data_wait_total) {
  t0_ = interval_t0_ = clock::now();
  data_wait_start_ = interval_data_wait0_ = data_wait_total_ = data_wait_total;
  interval_wait0_ = CollectiveWaitMeter::get().total_s();
}

double StepStats::elapsed() const { return std::chrono::duration<double>(clock::now() - t0_).count(); }

void StepStats::add_loss(const at::Tensor& loss) {
  loss_sum_ = loss_sum_.defined() ? loss_sum_ + loss.to(at::kDouble) : loss.to(at::kDouble);
}

void StepStats::add_step(int64_t local_rows, const DdpStepStats& ddp) {
  ++steps_;
  ++interval_steps_;
  rows_ += local_rows;
  interval_rows_ += local_rows;
  bytes_reduced_ += ddp.bytes_reduced;
  comm_wait_ += ddp.finalize_wait_s;
  interval_comm_wait_ += ddp.finalize_wait_s;
}

IntervalReport StepStats::close_interval(Communicator& comm, int world, const std::function<double()>& link_probe) {
  world_ = world;
  IntervalReport r;
  double dt = std::chrono::duration<double>(clock::now() - interval_t0_).count();
  // [loss sum, steps, then 6 slots per rank]: each rank fills its own slots, the sum gathers.
  constexpr int kPerRank = 6;
  const double wait_total = CollectiveWaitMeter::get().total_s();
  at::Tensor sums = at::zeros({2 + kPerRank * world}, at::kDouble);
  double* v = sums.data_ptr<double>();
  if (loss_sum_.defined()) v[0] = loss_sum_.item<double>();
  v[1] = static_cast<double>(interval_steps_);
  if (interval_steps_ > 0) {
    double* mine = v + 2 + kPerRank * comm.rank();
    mine[0] = dt / interval_steps_;
    mine[1] = (data_wait_total_ - interval_data_wait0_) / interval_steps_;
    mine[2] = interval_optimizer_ / interval_steps_;
    mine[3] = interval_comm_wait_ / interval_steps_;
    mine[4] = (wait_total - interval_wait0_) / interval_steps_;
  }
  const double link_s = link_probe ? link_probe() : 0;  // on every rank: it is collective
  if (interval_steps_ > 0) v[2 + kPerRank * comm.rank() + 5] = link_s;
  allreduce_now(comm, sums, ReduceOp::kSum, "stats.loss");
  v = sums.data_ptr<double>();
  r.loss = v[1] > 0 ? v[0] / v[1] : 0;
  last_loss_ = r.loss;
  for (int k = 0; k < world; ++k) {
    const double* q = v + 2 + kPerRank * k;
    RankSplit one;
    one.step_s = q[0];
    one.data_wait_s = q[1];
    one.optimizer_s = q[2];
    one.comm_blocked_s = q[3];
    one.wait_s = q[4];
    one.link_s = q[5];
    r.ranks.push_back(one);
  }
  if (dt > 0) {
    r.samples_per_s = static_cast<double>(interval_rows_) * world / dt;
    r.data_wait_pct = 100.0 * (data_wait_total_ - interval_data_wait0_) / dt;
    r.comm_wait_pct = 100.0 * interval_comm_wait_ / dt;
  }
  r.step_s = interval_steps_ ? dt / interval_steps_ : 0;
  loss_sum_ = at::Tensor();
  interval_steps_ = interval_rows_ = 0;
  interval_comm_wait_ = interval_optimizer_ = 0;
  // After the allreduce: its wait (and the probe's skew in it) counts in no interval.
  interval_wait0_ = CollectiveWaitMeter::get().total_s();
  interval_data_wait0_ = data_wait_total_;
  interval_t0_ = clock::now();
  return r;
}

nlohmann::json IntervalReport::per_rank_json() const { return splits_json(ranks); }

double StepStats::mean_step_seconds() const { return steps_ ? elapsed() / steps_ : 0; }

double StepStats::overall_samples_per_s() const {
  double t = elapsed();
  return t > 0 ? static_cast<double>(rows_) * world_ / t : 0;
}

double StepStats::overall_data_wait_pct() const {
  double t = elapsed();
  return t > 0 ? 100.0 * (data_wait_total_ - data_wait_start_) / t : 0;
}

double StepStats::overall_comm_wait_pct() const {
  double t = elapsed();
  return t > 0 ? 100.0 * comm_wait_ / t : 0;
}

}  // namespace hpctrain
