// Trainer::State, shared by the trainer's translation units (trainer.cpp: set-up, step, loop;
// trainer_data.cpp: the loaders; trainer_model.cpp: building and checking the model;
// trainer_report.cpp: lines, records, eval and summary). The checkpoint side (writer,
// resume, capture timing, records) is its own object, CheckpointSession. Private to src/train.
#pragma once

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "comm/router.h"
#include "dataset/loader.h"
#include "ddp/ddp.h"
#include "ddp/fsdp.h"
#include "diag/link_probe.h"
#include "metrics/progress.h"
#include "metrics/run_report.h"
#include "metrics/step_stats.h"
#include "metrics/straggler_watch.h"
#include "model/model.h"
#include "runtime/device.h"
#include "runtime/world.h"
#include "optim/amp.h"
#include "train/checkpoint_session.h"
#include "train/mfu.h"
#include "train/snapshot_session.h"
#include "eval/evaluate.h"
#include "optim/loss.h"
#include "optim/optim.h"
#include "optim/train_optimizer.h"
#include "train/trainer.h"

namespace hpctrain {

// trainer_recovery.cpp: the launcher's restart record from HPCTRAIN_RESTART (null when unset;
// CollectiveError when malformed), and the last train step logged in a metrics file (-1: none).
nlohmann::json launcher_restart();
int64_t last_train_step(const std::string& path);

struct Trainer::State {
  TrainConfig cfg;
  World& world;
  DeviceChoice dev;
  c10::Device device{c10::kCPU};
  std::unique_ptr<DeviceRouter> comm;
  std::unique_ptr<Loader> train, test;
  ModelEntry model_entry;
  ModelPtr model;
  std::unique_ptr<Loss> loss;
  std::unique_ptr<DistributedDataParallel> ddp;
  std::shared_ptr<FsdpEngine> fsdp;  // --zero 3 (then ddp carries only buffers and frozen parameters)
  std::vector<at::Tensor> params;
  std::unique_ptr<TrainOptimizer> opt;
  std::unique_ptr<LrSchedule> sched;
  MfuMeter mfu;
  LossScaler scaler{false};
  std::unique_ptr<Reporter> rep;
  std::unique_ptr<CheckpointSession> ckpt;
  std::unique_ptr<SnapshotSession> snap;  // --snapshot-every (trainer_snapshot.cpp)
  std::string resumed_from;               // what resume() restored from ("" : started fresh)
  std::optional<SamplerPosition> resume_pos;
  StepStats stats;
  std::unique_ptr<StragglerWatch> straggler;
  std::unique_ptr<LinkProbe> link_probe;  // multi-host runs with straggler detection on
  int64_t global_batch = 0, total_steps = 0, steps_per_epoch = 0;
  int64_t step = 0, start_epoch = 0;
  bool devices_checked = false;
  int64_t gathered_per_step = 0;   // --zero 3: the last step's FsdpStats::bytes_gathered
  int64_t checkpointed_units = 0;  // --activation-checkpointing: the model's units (0: off)
  nlohmann::json restart;          // the launcher's HPCTRAIN_RESTART record, null when not restarted
  int64_t restart_last_step = -1;  // rank 0: the last train step the failed run logged

  State(const TrainConfig& c, World& w, ModelEntry m) : cfg(c), world(w), model_entry(std::move(m)) {}

  Forward forward_fn() {
    return [this](const at::Tensor& x) {
      AutocastScope autocast(cfg.amp, dev.cuda);
      return model->forward(x);
    };
  }
  void setup();
  void open_data();                   // trainer_data.cpp
  void report_start(double base_lr);  // trainer_report.cpp, with the four below
  void start_flight_recorder();
  void report_restart(int64_t resumed_step);
  void build_model();
  void shard_parameters(at::ScalarType grad_comm_dtype);  // --zero 3, trainer_fsdp.cpp
  void check_model_output();
  void train_step(const Batch& b);
  [[noreturn]] void throw_diverged(const StepOutcome& outcome, const at::Tensor& step_loss);
  void log_interval(int64_t epoch);
  void resume();
  void save_checkpoint(int64_t epoch, bool sync);
  TrainProgress progress(int64_t epoch);
  void open_snapshots();                                // trainer_snapshot.cpp, with the two below
  std::optional<TrainProgress> resume_from_snapshot();  // collective
  void snapshot(int64_t epoch);
  bool step_boundary();
  std::vector<double> peak_memory_per_rank();
  ModelStateBytes model_state() const;  // this rank's parameters, gradients, optimizer state (bytes)
  EvalResult run_eval(int64_t epoch);
  nlohmann::json summary(int64_t epoch, const EvalResult& last_eval, double wall_s, bool trained);
  [[noreturn]] void throw_oom();
};

}  // namespace hpctrain
