// The synchronous steps of writing one checkpoint (internal to src/ckpt): host snapshot,
// manifest plan, shard files, atomic commit. CheckpointWriter runs them in a background thread;
// tests, benchmarks and crash-test children call them directly.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/manifest.h"

namespace hpctrain::ckpt {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Contiguous host copies (pinned memory for CUDA tensors) that the caller may not mutate.
// With copy_cpu=false, contiguous CPU tensors are used as they are (for synchronous writes,
// where nothing mutates them meanwhile). `reuse` (may be null): the buffers of an earlier
// snapshot that nobody reads any more; an entry with the same name, dtype, shape (and pinning)
// is copied into instead of allocating, which saves the page faults of fresh memory on every
// checkpoint (most of the training loop's stall); `reuse` is left empty. Throws
// hpctrain::Error on a bad name (empty, no group/ prefix, duplicate) or dtype.
NamedTensors snapshot_to_host(const NamedTensors& tensors, bool copy_cpu = true, NamedTensors* reuse = nullptr);
// The checks snapshot_to_host() starts with, alone (for a snapshot taken later, elsewhere).
void check_snapshot(const NamedTensors& tensors);

// Manifest with shard assignment, dtypes, shapes; checksums and shard sizes still empty.
Manifest plan_manifest(int64_t step, const CheckpointState& state, int world_size, int64_t shard_mb);

// Writes the shards s with s % nwriters == writer into `tmp_dir` (created if needed), each in
// one pass at disk speed (h5_image.h), and fills in `m` what that pass computes: the shard's
// size and whole-file xxh3, and the offset and xxh3 of each of its tensors. With `sync` each is
// fsynced (once all are written); without, commit() fsyncs them. Shard files are never left
// half-named: the directory is what is atomic.
void write_shards(const std::string& tmp_dir, Manifest& m, const NamedTensors& host, int writer, int nwriters,
                  bool compress, bool sync);

// Fills the xxh3 of every tensor that has none yet from the host tensors (same order as the
// manifest): rank 0's own copy of the tensors other ranks wrote (all_writers).
void fill_missing_checksums(Manifest& m, const NamedTensors& host);

// DIR/step-N.tmp for a step.
std::string tmp_dir_for(const std::string& dir, int64_t step);

// Publishes the step: writes manifest.json into the tmp dir and DIR/latest.tmp; then fsyncs
// the shards (unless `shards_synced`), the manifest, latest.tmp and the tmp dir, all writes
// before all fsyncs (on a journaling filesystem the first fsync commits them together, the rest
// find their changes committed); renames step-N.tmp -> step-N and latest.tmp -> latest, fsyncs
// DIR once for both renames, then prunes to `keep` (renames to *.tmp, one more fsync of DIR,
// then deletes). So a checkpoint costs one fsync per shard + 4 (+1 when it prunes). An existing
// step-N is replaced (retired via *.tmp first).
void commit(const std::string& dir, const Manifest& m, int keep, bool shards_synced);

// Everything above in one process (rank 0 writing alone). For tests, benchmarks, tools.
void write_checkpoint_sync(const CheckpointOptions& opts, int64_t step, const CheckpointState& state,
                           int world_size = 1);

}  // namespace hpctrain::ckpt
