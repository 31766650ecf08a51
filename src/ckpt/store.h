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

// Manifest with shard assignment, dtypes, shapes; checksums still empty.
Manifest plan_manifest(int64_t step, const CheckpointState& state, int world_size, int64_t shard_mb);

// Fills every entry's xxh3 from the host tensors (same order as the manifest).
void fill_checksums(Manifest& m, const NamedTensors& host);

// Writes the shards s with s % nwriters == writer into `tmp_dir` (created if needed), each
// fsynced. Shard files are never left half-named: the directory is what is atomic.
void write_shards(const std::string& tmp_dir, const Manifest& m, const NamedTensors& host,
                  int writer, int nwriters, bool compress);

// DIR/step-N.tmp for a step.
std::string tmp_dir_for(const std::string& dir, int64_t step);

// Writes manifest.json into the tmp dir, fsyncs it, renames step-N.tmp -> step-N, replaces
// DIR/latest atomically, then prunes to `keep`. An existing step-N is replaced.
void commit(const std::string& dir, const Manifest& m, int keep);

// Everything above in one process (rank 0 writing alone). For tests, benchmarks, tools.
void write_checkpoint_sync(const CheckpointOptions& opts, int64_t step, const CheckpointState& state,
                           int world_size = 1);

}  // namespace hpctrain::ckpt
