#include "train/step_stats.h"

#include <ATen/ATen.h>

#include "comm/communicator.h"
#include "ddp/ddp.h"

namespace hpctrain {

void StepStats::start(double data_wait_total) {
  t0_ = interval_t0_ = clock::now();
  data_wait_start_ = interval_data_wait0_ = data_wait_total_ = data_wait_total;
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
  comm_wait_ += ddp.finalize_wait_s;
  interval_comm_wait_ += ddp.finalize_wait_s;
}

IntervalReport StepStats::close_interval(Communicator& comm, int world) {
  world_ = world;
  IntervalReport r;
  double dt = std::chrono::duration<double>(clock::now() - interval_t0_).count();
  at::Tensor sums = at::zeros({2}, at::kDouble);
  if (loss_sum_.defined()) sums[0] = loss_sum_.item<double>();
  sums[1] = static_cast<double>(interval_steps_);
  comm.allreduce(sums, ReduceOp::kSum, "stats.loss")->wait();
  r.loss = sums[1].item<double>() > 0 ? sums[0].item<double>() / sums[1].item<double>() : 0;
  last_loss_ = r.loss;
  if (dt > 0) {
    r.samples_per_s = static_cast<double>(interval_rows_) * world / dt;
    r.data_wait_pct = 100.0 * (data_wait_total_ - interval_data_wait0_) / dt;
    r.comm_wait_pct = 100.0 * interval_comm_wait_ / dt;
  }
  r.step_s = interval_steps_ ? dt / interval_steps_ : 0;
  loss_sum_ = at::Tensor();
  interval_steps_ = interval_rows_ = 0;
  interval_comm_wait_ = 0;
  interval_data_wait0_ = data_wait_total_;
  interval_t0_ = clock::now();
  return r;
}

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
