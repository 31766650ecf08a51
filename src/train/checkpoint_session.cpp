// CheckpointSession: the metadata, the captured model and optimizer state (a deferred snapshot
// with --ckpt-async) and the TorchScript archive as a uint8 tensor, handed to CheckpointWriter;
// resume() restores from the checkpoint find_resume picks.
#include "train/checkpoint_session.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "dataset/dataset_info.h"
#include "dataset/tokenizer.h"
#include "hpctrain_version.h"
#include "metrics/progress.h"
#include "model/torchscript_model.h"
#include "runtime/check.h"
#include "runtime/clock.h"
#include "runtime/trace.h"
#include "optim/train_optimizer.h"

namespace hpctrain {

CheckpointSession::CheckpointSession(const TrainConfig& cfg, Communicator& comm, const ModelEntry& entry, Reporter& rep)
    : cfg_(cfg), entry_(entry), rep_(rep) {
  if (cfg.ckpt_dir.empty()) return;
  CheckpointOptions co;
  co.dir = cfg.ckpt_dir;
  co.shard_mb = cfg.ckpt_shard_mb;
  co.keep = static_cast<int>(cfg.ckpt_keep);
  co.async = cfg.ckpt_async;
  co.compress = cfg.ckpt_compress;
  co.all_writers = cfg.ckpt_writers == "all";
  writer_ = std::make_unique<CheckpointWriter>(co, comm);
}

CheckpointSession::~CheckpointSession() = default;

int64_t CheckpointSession::resume_step() {
  if (cfg_.resume == "none" || (cfg_.resume == "auto" && cfg_.ckpt_dir.empty())) return -1;
  if (!resume_path_) resume_path_ = find_resume(cfg_.ckpt_dir, cfg_.resume);
  if (!*resume_path_) return -1;
  const std::string name = std::filesystem::path(**resume_path_).filename().string();
  return name.rfind("step-", 0) == 0 ? std::atoll(name.c_str() + 5) : 0;
}

std::optional<TrainProgress> CheckpointSession::resume(Model& model, TrainOptimizer& opt, c10::Device device,
                                                       int world_size, int64_t global_batch) {
  if (cfg_.resume == "none") return std::nullopt;
  if (cfg_.resume == "auto" && cfg_.ckpt_dir.empty()) return std::nullopt;
  if (!resume_path_) resume_path_ = find_resume(cfg_.ckpt_dir, cfg_.resume);
  const std::optional<std::string>& path = *resume_path_;
  if (!path) {
    rep_.message("hpctrain train: no checkpoint to resume from in " + cfg_.ckpt_dir + "; starting fresh");
    return std::nullopt;
  }
  CheckpointState st = read_checkpoint(*path, device);
  return restore(st, *path, model, opt, world_size, global_batch);
}

TrainProgress CheckpointSession::restore(const CheckpointState& st, const std::string& source, Model& model,
                                         TrainOptimizer& opt, int world_size, int64_t global_batch) {
  // Which checkpoint and why, for the messages: a reused --ckpt-dir resumes by default.
  const std::string why = cfg_.resume == "auto" ? "--resume auto: the newest checkpoint in --ckpt-dir " + cfg_.ckpt_dir +
                                                      (cfg_.snapshot_every > 0 ? " or snapshot in host memory" : "")
                                                : "--resume " + cfg_.resume;
  TrainProgress p;
  try {
    p = restore_model_state(st, model);
    opt.restore(st, source);
  } catch (const Error& e) {
    // The same kind as thrown (every rank reads the same checkpoint: the same error everywhere).
    const std::string msg = "cannot resume from " + source + " (" + why + "): " + e.what() +
                            "; to train this model from scratch pass --resume none (or another --ckpt-dir)";
    if (dynamic_cast<const CollectiveError*>(&e)) throw CollectiveError(msg);
    throw Error(msg);
  }
  const nlohmann::json snap = st.meta.value("snapshot", nlohmann::json::object());
  int64_t saved_world = snap.value("world_size", st.meta.value("world_size", int64_t{world_size}));
  rep_.message("hpctrain train: resumed from " + source + " at step " + std::to_string(p.step) + ", epoch " +
               std::to_string(p.sampler.epoch + 1) + ", " + std::to_string(p.sampler.samples_consumed) +
               " samples into the epoch (saved with " + std::to_string(saved_world) + " rank(s); now " +
               std::to_string(world_size) + ", global batch " + std::to_string(global_batch) + "; " + why +
               (cfg_.resume == "auto" ? "; --resume none starts fresh" : "") + ")");
  return p;
}

void CheckpointSession::save(const TrainProgress& p, Model& model, TrainOptimizer& opt, const DatasetInfo& info,
                             bool sync) {
  if (!writer_) return;
  TraceSpan span("checkpoint", "ckpt");
  auto t0 = std::chrono::steady_clock::now();
  nlohmann::json meta = {{"config", cfg_.to_json()},
                         {"model", cfg_.model},
                         {"model_origin", entry_.origin},
                         {"sample_shape", info.sample_shape},
                         {"num_classes", info.num_classes},
                         {"target_shape", info.target_shape},
                         {"hpctrain_version", HPCTRAIN_VERSION}};
  if (info.tokens) {  // what eval and generate rebuild a language model from
    meta["vocab_size"] = info.vocab_size;
    meta["seq_len"] = info.seq_len;
    meta["tokenizer"] = info.tokenizer;
  }
  // Deferred snapshot (ckpt/checkpoint.h): parameters and optimizer state change only in the
  // next optimizer step, which waits in before_update(); buffers change in the next forward.
  const bool defer = !sync && cfg_.ckpt_async;
  CheckpointState st = capture_model_state(model, p, meta, /*copy_buffers=*/defer);
  opt.capture(st);  // collective under ZeRO-1 (the shards are gathered)
  if (!entry_.archive.empty()) {
    // The TorchScript file itself, so eval and resume need nothing but the checkpoint.
    if (!archive_tensor_.defined()) {
      archive_tensor_ = at::empty({static_cast<int64_t>(entry_.archive.size())}, at::kByte);
      std::memcpy(archive_tensor_.data_ptr(), entry_.archive.data(), entry_.archive.size());
    }
    st.tensors.emplace_back(kTorchScriptTensor, archive_tensor_);
  }
  if (!info.tokenizer_model.empty()) {  // what generate encodes and decodes text with
    at::Tensor bytes = at::empty({static_cast<int64_t>(info.tokenizer_model.size())}, at::kByte);
    std::memcpy(bytes.data_ptr(), info.tokenizer_model.data(), info.tokenizer_model.size());
    st.tensors.emplace_back(kTokenizerTensor, bytes);
  }
  capture_s_[p.step] = seconds_since(t0);
  writer_->save(p.step, std::move(st), defer ? Snapshot::kBeforeUpdate : Snapshot::kAtCall);
  if (sync) writer_->finish();
}

// Rank 0's numbers; every rank drains its list. The stall adds the state capture to what the
// writer measured in save().
void CheckpointSession::report(int64_t final_step) {
  if (!writer_) return;
  for (const CheckpointStats& c : writer_->take_completed()) {
    double stall = c.stall_s + capture_s_[c.step];
    capture_s_.erase(c.step);
    rep_.metrics({{"type", "checkpoint"},
                  {"step", c.step},
                  {"stall_ms", stall * 1e3},
                  {"write_ms", c.write_s * 1e3},
                  {"bytes", c.bytes},
                  {"async", c.async},
                  {"final", c.step == final_step}});
  }
}

void CheckpointSession::before_update() {
  if (writer_) writer_->before_update();
}

CheckpointWriter::BoundaryVote CheckpointSession::vote() {
  return writer_ ? writer_->boundary_vote() : CheckpointWriter::BoundaryVote{};
}

void CheckpointSession::settle(int64_t errors, int64_t pending) {
  if (!writer_) return;
  writer_->settle_boundary(errors, pending);
  report();
}

void CheckpointSession::finish() {
  if (writer_) writer_->finish();
}

}  // namespace hpctrain
