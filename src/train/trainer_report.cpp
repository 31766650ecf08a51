// What Trainer::State reports (the words and records themselves: metrics/run_report.h): the
// start-up lines (config, world, model with tied weights counted once, the allreduce's path,
// the gradient communication dtype, token data, the optimizer's state per rank), each log
// interval, each eval, the summary, every rank's peak memory and the out-of-memory line.
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include <cmath>

#include "metrics/run_report.h"
#include "model/checkpoint_unit.h"
#include "runtime/check.h"
#include "runtime/device.h"
#include "train/trainer_state_impl.h"

namespace hpctrain {

void Trainer::State::report_start(double base_lr) {
  std::string tied;
  for (const auto& [alias, name] : model->tied_names()) tied += (tied.empty() ? "; " : ", ") + alias + " is " + name;
  const ZeroPartition* zp = ddp->zero() ? &ddp->zero_partition() : fsdp ? &fsdp->partition() : nullptr;
  const int zero_world = zp ? zp->world_size : 0;
  const int64_t padding = zp ? zp->padding() : 0;
  rep->message("hpctrain train: config " + cfg.to_json().dump());
  rep->message("hpctrain train: " + std::to_string(world.size()) + " rank(s) on " + std::to_string(world.node_count()) +
               " node(s), device " + dev.str() + ", model " + cfg.model + " (" +
               std::to_string(count_parameters(*model)) + " parameters" + tied + "), " + "global batch " +
               std::to_string(global_batch) + " (" + std::to_string(cfg.batch_size) + " per rank), " +
               std::to_string(steps_per_epoch) + " steps/epoch, " + std::to_string(total_steps) + " steps, lr " +
               std::to_string(base_lr) + ", " +
               (fsdp ? std::to_string(fsdp->num_units()) + " unit(s) instead of buckets" : ddp->plan().describe()) + ", " +
               optimizer_line(cfg.optimizer, opt->state_bytes(), zero_world, padding, fsdp ? 3 : ddp->zero_stage()));
  rep->message("hpctrain train: " + model_state_line(model_state()));
  if (std::string d = model->describe(); !d.empty()) rep->message("hpctrain train: model " + d);
  if (fsdp) rep->message("hpctrain train: " + fsdp->describe());
  if (checkpointed_units > 0) rep->message("hpctrain train: " + activation_checkpointing_line(checkpointed_units));
  if (world.size() > 1) {  // the allreduce's path; under ZeRO (any stage) its reduce_scatter's and allgather's too
    const std::vector<std::string> algos = comm->describe_algorithms();
    for (size_t i = 0; i < algos.size() && i < (ddp->zero() || fsdp ? 3u : 1u); ++i) rep->message("hpctrain train: " + algos[i]);
    // The dtype the reducer actually hands the buckets over in, and how 16-bit sums travel.
    rep->message("hpctrain train: " + (fsdp ? fsdp->describe_comm() : ddp->reducer().describe_comm()));
    const at::ScalarType wire = ddp->reducer().wire_dtype();
    for (const std::string& a : algos)
      if ((wire == at::kBFloat16 || wire == at::kHalf) && a.rfind("half types:", 0) == 0) rep->message("hpctrain train: " + a);
  }
  if (train->info().tokens) {
    rep->message("hpctrain train: " + token_data_line(cfg.data, train->info(), test->info(), global_batch));
    rep->message("hpctrain train: " + mfu.describe());
  }
}

EvalResult Trainer::State::run_eval(int64_t epoch) {
  // The last training forward updated each rank's BN statistics from its own batch; evaluate
  // every shard with rank 0's, the ones a checkpoint holds, so that `hpctrain eval` on it
  // reproduces this result (no-op without broadcast buffers, i.e. with SyncBN or one rank).
  ddp->prepare_forward();
  EvalResult r = evaluate(*model, forward_fn(), *loss, *test, *comm);
  nlohmann::json rec = eval_record(step, epoch, r.loss, r.accuracy, r.samples, test->info());
  rep->metrics(rec);
  rep->message(eval_line(rec, loss->classification(), test->info().tokens));
  return r;
}

void Trainer::State::log_interval(int64_t epoch) {
  IntervalReport iv = stats.close_interval(*comm, world.size(), [this] { return link_probe->run(*comm); });
  const int64_t seq_len = train->info().tokens ? train->info().seq_len : 0;
  nlohmann::json rec = interval_record(iv, step, epoch, sched->lr_at(step - 1), peak_memory_mb(dev), seq_len);
  if (scaler.enabled()) rec["loss_scale"] = scaler.scale();
  ProgressLine p{epoch + 1,         cfg.epochs,       step,
                 total_steps,       iv.loss,          rec["lr"].get<double>(),
                 iv.samples_per_s,  iv.data_wait_pct, iv.comm_wait_pct,
                 stats.mean_step_seconds() * static_cast<double>(total_steps - step)};
  if (seq_len > 0) p.tokens_per_s = rec["tokens_per_s"].get<double>();
  if (seq_len > 0 && mfu.on()) rec["mfu"] = p.mfu = mfu.mfu(p.tokens_per_s);
  straggler->annotate(iv.ranks, p.note, rec);
  rep->progress(p);
  rep->metrics(rec);
}

nlohmann::json Trainer::State::summary(int64_t epoch, const EvalResult& last_eval, double wall_s, bool trained) {
  RunSummary s;
  s.world_size = world.size();
  s.device = dev.cuda ? "cuda" : "cpu";
  s.model = cfg.model;
  s.parameters = count_parameters(*model);
  s.steps = step;
  s.epochs = epoch;
  s.global_batch = global_batch;
  s.trained = trained;
  s.samples_per_s = stats.overall_samples_per_s();
  s.train_loss = stats.last_loss();
  s.test_loss = last_eval.loss;
  s.test_accuracy = last_eval.accuracy;
  s.data_wait_pct = stats.overall_data_wait_pct();
  s.comm_blocked_pct = stats.overall_comm_wait_pct();
  s.peak_mem_mb_per_rank = peak_memory_per_rank();
  s.zero = cfg.zero;
  s.optim_state_bytes_per_rank = opt->state_bytes();
  s.model_state = model_state();
  s.grad_comm_dtype = fsdp ? fsdp->wire_dtype_name() : ddp->reducer().wire_dtype_name();
  s.bytes_reduced = stats.bytes_reduced();
  if (fsdp) {
    s.bytes_gathered_per_step = gathered_per_step;
    s.gather_dtype = fsdp->gather_dtype_name();
  }
  s.wall_s = wall_s;
  s.straggler = straggler->summary();
  s.restarts = restart.is_object() ? restart.value("restart", 0) : 0;
  if (snap) {
    s.snapshots_taken = snap->taken();
    s.snapshots_skipped = snap->skipped();
  }
  s.checkpointed_units = checkpointed_units;
  const RecomputeTotals recomputed = recompute_totals();
  s.recomputed_units = recomputed.units;
  s.recompute_s = std::round(recomputed.seconds * 1000) / 1000;
  if (train->info().tokens) s.seq_len = train->info().seq_len;
  if (s.seq_len > 0 && mfu.on()) s.mfu = mfu.mfu(s.samples_per_s * static_cast<double>(s.seq_len));
  s.test = test->info();
  return summary_record(s);
}

void Trainer::State::throw_oom() {
  // The guard then aborts the job, so no other rank waits in the step's allreduce.
  throw Error(oom_line(dev.str(), step, cfg.batch_size, dev.cuda ? cuda_memory_in_use_mb(dev.index) : 0.0,
                       peak_memory_mb(dev)));
}

// What this rank holds of the model state, measured from the run's tensors (metrics/run_report.h).
ModelStateBytes Trainer::State::model_state() const {
  ModelStateBytes m;
  m.stage = ddp->zero_stage();
  m.parameters = ddp->held_param_bytes();
  m.gradients = ddp->reducer().held_grad_bytes();
  m.gradients_peak = ddp->reducer().last_stats().peak_grad_bytes;
  m.optimizer_state = opt->state_bytes();
  if (fsdp) {  // --zero 3: the shards, held between steps, and the largest unit gathered during one
    m.stage = 3;
    m.parameters += fsdp->resident_param_bytes();
    for (const auto& g : fsdp->grad_blocks()) m.gradients += static_cast<int64_t>(g.nbytes());
    m.gradients_peak = m.gradients;
    m.largest_unit = fsdp->largest_unit_bytes();
  }
  return m;
}

// Collective: every rank's peak memory (CUDA allocator peak, or peak RSS on CPU), by rank.
std::vector<double> Trainer::State::peak_memory_per_rank() {
  at::Tensor mine = at::full({1}, peak_memory_mb(dev), at::kDouble);
  std::vector<at::Tensor> parts{mine};
  if (world.size() > 1) comm->allgather(mine, &parts, "summary.peak_mem")->wait();
  std::vector<double> out;
  for (const auto& t : parts) out.push_back(std::round(t.item<double>() * 10) / 10);
  return out;
}

}  // namespace hpctrain
