// Trainer::State's snapshot side (--snapshot-every, train/snapshot_session.h): the session
// opened with the state's size, resume from a snapshot newer than the newest disk checkpoint,
// and the snapshot at each step boundary.
#include "train/trainer_state_impl.h"

namespace hpctrain {

namespace {

// The bytes of one rank's snapshot: the model's parameters and buffers, and about as much again
// per optimizer slot (AdamW: exp_avg and exp_avg_sq; SGD with momentum: its buffer); with its
// own shard only (ZeRO-1/2/3), this rank's optimizer state instead, and under --zero 3 only
// its own parameter blocks in place of the sharded (fp32) parameters.
int64_t snapshot_state_bytes(Model& model, const TrainConfig& cfg, const TrainOptimizer& opt, const FsdpEngine* fsdp) {
  int64_t params = 0, buffers = 0;
  for (const auto& [name, t] : model.named_parameters()) params += static_cast<int64_t>(t.nbytes());
  for (const auto& [name, t] : model.named_buffers())
    if (t.defined()) buffers += static_cast<int64_t>(t.nbytes());
  if (fsdp) {
    params -= fsdp->partition().param_numel() * static_cast<int64_t>(sizeof(float));
    for (const at::Tensor& b : fsdp->param_blocks()) params += static_cast<int64_t>(b.nbytes());
  }
  if (opt.shards_capture_locally()) return params + buffers + opt.state_bytes();
  const int64_t slots = cfg.optimizer == "adamw" ? 2 : cfg.momentum > 0 ? 1 : 0;
  return params * (1 + slots) + buffers;
}

}  // namespace

void Trainer::State::open_snapshots() {
  snap = std::make_unique<SnapshotSession>(cfg, world, *rep, snapshot_state_bytes(*model, cfg, *opt, fsdp.get()),
                                           opt->shards_capture_locally());
  if (!snap->on()) snap.reset();
}

std::optional<TrainProgress> Trainer::State::resume_from_snapshot() {
  if (!snap) return std::nullopt;
  std::optional<SnapshotSession::Picked> picked = snap->pick(ckpt->resume_step(), device);
  if (!picked) return std::nullopt;
  resumed_from = picked->source;
  return ckpt->restore(picked->state, picked->source, *model, *opt, world.size(), global_batch);
}

// Every rank's snapshot must be the state a disk checkpoint of this step holds (rank 0's), so
// that any of them resumes the run bitwise: BatchNorm's running statistics differ between ranks
// after a forward (without --sync-bn), and the next step's prepare_forward would broadcast rank
// 0's. So at a snapshot step that broadcast comes now (it is idempotent: the next one sends the
// same values); one small collective after the step's collectives.
void Trainer::State::snapshot(int64_t epoch) {
  if (!snap || step >= total_steps || step % cfg.snapshot_every != 0) return;
  if (!snap->skips_next()) ddp->prepare_forward();  // every rank skips alike: no broadcast for a skipped one
  snap->save(progress(epoch), *model, *opt);
}

}  // namespace hpctrain
