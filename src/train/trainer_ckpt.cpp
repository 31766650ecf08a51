// Trainer::State's checkpoint side: --resume, saving, and the per-checkpoint metrics records.
#include <ATen/ATen.h>

#include <chrono>
#include <cstring>

#include "ckpt/checkpoint.h"
#include "runtime/trace.h"
#include "train/torchscript_model.h"
#include "train/train_state.h"
#include "train/trainer_state_impl.h"
#include "hpctrain_version.h"

namespace hpctrain {

// --resume auto|none|PATH. Every rank reads the same files and reaches the same decision.
void Trainer::State::resume() {
  if (cfg.resume == "none") return;
  if (cfg.resume == "auto" && cfg.ckpt_dir.empty()) return;
  std::optional<std::string> path = find_resume(cfg.ckpt_dir, cfg.resume);
  if (!path) {
    rep->message("hpctrain train: no checkpoint to resume from in " + cfg.ckpt_dir + "; starting fresh");
    return;
  }
  CheckpointState st = read_checkpoint(*path, device);
  TrainProgress p = restore_model_state(st, *model);
  opt->restore(st, *path);
  step = p.step;
  start_epoch = p.sampler.epoch;
  resume_pos = p.sampler;
  scaler.restore(p.scaler_scale, p.scaler_good);
  int64_t saved_world = st.meta.value("world_size", int64_t{world.size()});
  rep->message("hpctrain train: resumed from " + *path + " at step " + std::to_string(step) +
               ", epoch " + std::to_string(p.sampler.epoch + 1) + ", " +
               std::to_string(p.sampler.samples_consumed) + " samples into the epoch (saved with " +
               std::to_string(saved_world) + " rank(s); now " + std::to_string(world.size()) +
               ", global batch " + std::to_string(global_batch) + ")");
}

void Trainer::State::save_checkpoint(int64_t epoch, bool sync) {
  if (!writer) return;
  TraceSpan span("checkpoint", "ckpt");
  auto t0 = std::chrono::steady_clock::now();
  TrainProgress p;
  p.step = step;
  p.epoch = epoch;
  p.sampler = train->position();
  p.scaler_scale = scaler.scale();
  p.scaler_good = scaler.good_steps();
  const auto& info = train->info();
  nlohmann::json meta = {{"config", cfg.to_json()},
                         {"model", cfg.model},
                         {"model_origin", model_entry.origin},
                         {"sample_shape", info.sample_shape},
                         {"num_classes", info.num_classes},
                         {"target_shape", info.target_shape},
                         {"hpctrain_version", HPCTRAIN_VERSION}};
  CheckpointState st = capture_model_state(*model, p, meta);
  opt->capture(st);
  if (!model_entry.archive.empty()) {
    // The TorchScript file itself, so eval and resume need nothing but the checkpoint.
    if (!archive_tensor.defined()) {
      archive_tensor = at::empty({static_cast<int64_t>(model_entry.archive.size())}, at::kByte);
      std::memcpy(archive_tensor.data_ptr(), model_entry.archive.data(), model_entry.archive.size());
    }
    st.tensors.emplace_back(kTorchScriptTensor, archive_tensor);
  }
  capture_s[step] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  writer->save(step, std::move(st));
  if (sync) writer->finish();
}

// One metrics record per committed checkpoint (rank 0's numbers; every rank drains its list).
// The stall adds the state capture to what the writer measured in save().
void Trainer::State::report_checkpoints(int64_t final_step) {
  for (const CheckpointStats& c : writer->take_completed()) {
    double stall = c.stall_s + capture_s[c.step];
    capture_s.erase(c.step);
    rep->metrics({{"type", "checkpoint"}, {"step", c.step}, {"stall_ms", stall * 1e3},
                  {"write_ms", c.write_s * 1e3}, {"bytes", c.bytes}, {"async", c.async},
                  {"final", c.step == final_step}});
  }
}

}  // namespace hpctrain
