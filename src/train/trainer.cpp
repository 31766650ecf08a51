// Trainer: set-up (inputs every rank reads alike are checked under agree_on_failure, before any
// metrics file is replaced) and the loop: steps with gradient accumulation, one agreement per
// step boundary, log intervals, an eval per epoch, checkpoints: the plain flow of a run, top to
// bottom. The loaders: trainer_data.cpp; the model: trainer_model.cpp; every line and record
// (start-up, intervals, evals, summary): trainer_report.cpp; a diverged step:
// trainer_diverged.cpp; the flight recorder and launcher restarts: trainer_recovery.cpp.
#include "train/trainer.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>

#include "comm/guard/op_guard.h"
#include "comm/guard/wait_meter.h"
#include "comm/open_run.h"
#include "comm/run_ops.h"
#include "metrics/trace_file.h"
#include "runtime/agree.h"
#include "runtime/check.h"
#include "runtime/trace.h"
#include "train/device_check.h"
#include "train/preempt.h"
#include "train/step_boundary.h"
#include "train/trainer_state_impl.h"

namespace hpctrain {

Trainer::Trainer(const TrainConfig& config, World& world) : Trainer(config, world, ModelEntry{}) {}

Trainer::Trainer(const TrainConfig& config, World& world, ModelEntry model)
    : s_(std::make_unique<State>(config, world, std::move(model))) {
  s_->setup();
}

Trainer::~Trainer() = default;

nlohmann::json train(World& world, const TrainConfig& config, ModelFactory factory) {
  ModelEntry m;
  m.name = config.model;
  m.origin = "program";
  m.factory = std::move(factory);
  Trainer t(config, world, std::move(m));
  return t.run();
}

void Trainer::State::setup() {
  // Decisions every rank reaches identically come first, before any data or device is touched.
  check_pairings(cfg);                   // again, for configs built in code rather than by load_config
  CommSettings cs = comm_settings(cfg);  // the environment's values are in cfg already (load_config)
  start_flight_recorder();               // before the first collective, so it sees them all
  restart = launcher_restart();          // a launcher restarted this job (HPCTRAIN_RESTART), or null
  RunContext run = open_run(world, cfg.device, cs);
  dev = run.dev;
  device = run.device;
  comm = std::move(run.comm);
  check_amp(cfg.amp, dev.cuda);
  // Per-rank wait accounting for the straggler report (off with --straggler-threshold 0).
  CollectiveWaitMeter::get().enable(cfg.straggler_threshold > 0);
  std::vector<std::string> hosts =
      cfg.straggler_threshold > 0 ? gather_hostnames(*comm, world.hostname()) : std::vector<std::string>{};
  link_probe = std::make_unique<LinkProbe>(hosts, world.rank(), link_prober(*comm) != nullptr);
  straggler = std::make_unique<StragglerWatch>(cfg.straggler_threshold, std::move(hosts), world.rank());
  if (!cfg.trace.empty()) Tracer::get().enable(world.rank());
  install_preemption_handlers();

  open_data();  // trainer_data.cpp

  torch::manual_seed(static_cast<uint64_t>(cfg.seed));
  build_model();
  check_model_output();

  global_batch = cfg.batch_size * world.size();
  steps_per_epoch = train->batches_per_epoch();
  total_steps = steps_per_epoch * cfg.epochs;
  if (cfg.max_steps > 0) total_steps = std::min(total_steps, cfg.max_steps);
  const OptimConfig oc = optim_config(cfg);
  double base_lr = scaled_lr(oc, global_batch);
  opt = fsdp ? make_fsdp_train_optimizer(oc, *model, *fsdp, *comm, base_lr)
             : make_train_optimizer(oc, *model, *ddp, *comm, base_lr);
  sched = std::make_unique<LrSchedule>(oc, base_lr, total_steps);
  mfu = setup_mfu(*model, cfg, dev, train->info().tokens, *comm);
  scaler = LossScaler(cfg.amp == "fp16");

  rep = std::make_unique<Reporter>(world.rank() == 0);
  ckpt = std::make_unique<CheckpointSession>(cfg, *comm, model_entry, *rep);
  open_snapshots();  // trainer_snapshot.cpp
  agree_on_failure(world.mpi_comm(), [&] { resume(); });  // every rank reads the same checkpoint
  // Only now, with every input validated, may the metrics file of a previous run be replaced.
  run_on_rank0(world.mpi_comm(), "", [&] {
    rep->open_tensorboard(cfg.tensorboard, step);
    if (restart.is_object() && !cfg.metrics.empty()) restart_last_step = last_train_step(cfg.metrics);
    rep->open_metrics(cfg.metrics, cfg.to_json(), /*append=*/restart.is_object());
  });
  report_start(base_lr);
}

// The one agreement per step (train/step_boundary.h): the preemption flag (the signal handler
// only set it; a rank that got no signal still joins the final checkpoint) and the checkpoint
// writer's error/pending vote ride in one allreduce. Returns whether to stop for preemption.
bool Trainer::State::step_boundary() {
  BoundaryVotes mine;
  mine.preempt = preemption_signal() != 0 ? 1 : 0;
  CheckpointWriter::BoundaryVote w = ckpt->vote();
  mine.ckpt_error = w.error;
  mine.ckpt_pending = w.pending;
  mine.snapshot_busy = snap ? snap->busy_vote() : 0;
  BoundaryVotes all = agree_at_boundary(*comm, mine);
  ckpt->settle(all.ckpt_error, all.ckpt_pending);
  if (snap) snap->settle(all.snapshot_busy);
  return all.preempt > 0;
}

// --resume: every rank reads the same checkpoint and continues from the same step.
void Trainer::State::resume() {
  if (fsdp) fsdp->materialize();  // --zero 3: the state loads into whole parameters, then is sharded
  std::optional<TrainProgress> p = resume_from_snapshot();  // trainer_snapshot.cpp; nullopt: the disk's
  if (!p) {
    p = ckpt->resume(*model, *opt, device, world.size(), global_batch);
    if (p) resumed_from = "disk checkpoint step " + std::to_string(p->step);
  }
  if (fsdp) fsdp->shard_from_params(p.has_value());
  if (!p) return;
  step = p->step;
  start_epoch = p->sampler.epoch;
  resume_pos = p->sampler;
  scaler.restore(p->scaler_scale, p->scaler_good);
}

TrainProgress Trainer::State::progress(int64_t epoch) {
  TrainProgress p;
  p.step = step;
  p.epoch = epoch;
  p.sampler = train->position();
  p.scaler_scale = scaler.scale();
  p.scaler_good = scaler.good_steps();
  return p;
}

void Trainer::State::save_checkpoint(int64_t epoch, bool sync) { ckpt->save(progress(epoch), *model, *opt, train->info(), sync); }

void Trainer::State::train_step(const Batch& b) {
  if (!devices_checked) {
    check_devices({{"images", b.images}, {"labels", b.labels}, {"model parameters", params[0]}}, device);
    devices_checked = true;
  }
  opt->set_lr(sched->lr_at(step));
  ddp->prepare_forward();
  auto xs = b.images.chunk(cfg.grad_accum), ys = b.labels.chunk(cfg.grad_accum);
  const double rows = static_cast<double>(b.images.size(0));
  at::Tensor step_loss;  // this rank's batch loss, read only if the step diverges
  for (size_t k = 0; k < xs.size(); ++k) {
    at::Tensor loss;
    {
      TraceSpan span("forward", "compute");
      AutocastScope autocast(cfg.amp, dev.cuda);
      at::Tensor out = model->forward(xs[k]);
      // Each micro-batch's mean, weighted by its share of the batch: the sum is the batch mean.
      loss = this->loss->mean_loss(out, ys[k]) * (xs[k].size(0) / rows);
    }
    TraceSpan span("backward", "compute");
    if (k + 1 < xs.size()) {
      auto no_sync = ddp->no_sync();
      ddp->backward(scaler.scale_loss(loss));
    } else {
      ddp->backward(scaler.scale_loss(loss));
    }
    stats.add_loss(loss.detach());
    step_loss = step_loss.defined() ? step_loss + loss.detach() : loss.detach();
  }
  TraceSpan span("optimizer", "compute");
  const auto t_opt = std::chrono::steady_clock::now();
  ckpt->before_update();  // a checkpoint's snapshot taken off the step boundary (almost never waits)
  if (snap) snap->before_update();  // the same for --snapshot-every's copy
  StepOutcome outcome = opt->step(scaler, cfg.clip_grad_norm);
  if (outcome.kind == StepOutcome::kDiverged) throw_diverged(outcome, step_loss);
  scaler.update(outcome.kind == StepOutcome::kSkipped);
  ddp->zero_grad();
  if (fsdp) {
    gathered_per_step = fsdp->stats().bytes_gathered;
    fsdp->zero_grad();
  }
  stats.add_optimizer(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_opt).count());
  stats.add_step(b.images.size(0), ddp->last_step());
}

nlohmann::json Trainer::run() {
  State& s = *s_;
  auto t0 = std::chrono::steady_clock::now();
  EvalResult last_eval;
  bool evaluated_at_end = false;
  int64_t epoch = s.start_epoch;
  s.stats.start(s.train->data_wait_seconds());
  bool preempted = false;
  const int64_t first_step = s.step;
  if (first_step >= s.total_steps)
    s.rep->message("hpctrain train: nothing to train: the resumed checkpoint is at step " + std::to_string(first_step) +
                   " of " + std::to_string(s.total_steps) +
                   " (raise --epochs or --max-steps to continue, or --resume none to start over); "
                   "evaluating it");
  for (; epoch < s.cfg.epochs && s.step < s.total_steps && !preempted; ++epoch) {
    if (s.resume_pos && s.resume_pos->epoch == epoch)
      s.train->start_at(*s.resume_pos);
    else
      s.train->start_epoch(epoch);
    s.resume_pos.reset();
    s.model->train(true);
    evaluated_at_end = false;
    for (;;) {
      if (s.step >= s.total_steps) break;
      std::optional<Batch> batch;
      {
        TraceSpan span("data_wait", "wait");
        batch = s.train->next();
      }
      if (!batch) break;
      set_current_step(s.step);  // quoted in watchdog reports
      try {
        s.train_step(*batch);
      } catch (const c10::OutOfMemoryError&) {
        s.throw_oom();  // one line with what the user can change, instead of the allocator's dump
      }
      ++s.step;
      if (s.step == first_step + 1 && s.restart.is_object()) s.report_restart(first_step);
      s.stats.set_data_wait(s.train->data_wait_seconds());
      if (s.step % s.cfg.log_every == 0 || s.step == s.total_steps) s.log_interval(epoch);
      if (s.step_boundary()) {
        preempted = true;
        break;
      }
      if (s.cfg.ckpt_every > 0 && s.step % s.cfg.ckpt_every == 0 && s.step < s.total_steps)
        s.save_checkpoint(epoch, false);
      s.snapshot(epoch);  // --snapshot-every: the state into host memory (trainer_snapshot.cpp)
    }
    if (preempted) break;
    last_eval = s.run_eval(epoch);
    evaluated_at_end = true;
  }
  if (preempted) {
    s.rep->message("hpctrain train: preemption signal received (" + std::to_string(preemption_signal()) +
                   " on rank 0); checkpointing at step " + std::to_string(s.step));
    s.save_checkpoint(epoch, /*sync=*/true);
    s.ckpt->report(s.step);
    if (s.snap) s.snap->finish();  // the disk holds this step now; no copy left in flight at MPI_Finalize
    // Requeueing is the launcher's job: the caller exits kPreemptedExitCode (75) and
    // slurm/train.sbatch requeues on it.
    return {{"preempted", true}, {"steps", s.step}, {"world_size", s.world.size()}};
  }
  if (!evaluated_at_end) last_eval = s.run_eval(std::max<int64_t>(epoch - 1, 0));
  if (s.ckpt->writes()) {
    s.save_checkpoint(std::max<int64_t>(epoch - 1, 0), /*sync=*/false);
    s.ckpt->finish();
    s.ckpt->report(s.step);
  }
  if (s.snap) s.snap->finish();  // a clean finish: the snapshots are no longer needed
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json summary = s.summary(epoch, last_eval, wall, /*trained=*/s.step > first_step);  // trainer_report.cpp
  if (!s.cfg.trace.empty()) write_trace(s.cfg.trace, *s.comm, s.world.rank());
  s.rep->metrics({{"type", "summary"}, {"summary", summary}});
  return summary;
}

}  // namespace hpctrain
