// Reading and verifying checkpoints (internal to src/ckpt; the public entry points are
// read_checkpoint / find_resume / load_model in checkpoint.h).
#pragma once

#include <functional>
#include <string>

#include "ckpt/manifest.h"
#include "ckpt/store.h"

namespace hpctrain::ckpt {

// A step directory stays as is; a checkpoint root with a `latest` file resolves to the step
// directory it names. Throws hpctrain::Error if neither.
std::string resolve_checkpoint_path(const std::string& path);

// True for a merged single-file checkpoint (path ends in .h5 and is a regular file).
bool is_merged_file(const std::string& path);
// True for a merged LibTorch archive (path ends in .pt and is a regular file).
bool is_pt_file(const std::string& path);

// Reads every tensor of a step directory, checking completeness (every shard file, every
// manifest tensor, no unexpected dataset), dtype, shape and checksum. Each tensor read is
// handed to `visit` (may be null) with its manifest entry. Throws hpctrain::Error naming the
// file and the tensor on the first failure.
Manifest verify_checkpoint(const std::string& step_dir,
                           const std::function<void(const TensorEntry&, at::Tensor)>& visit = {});

// Reads a merged .h5 file: every dataset (names as stored, e.g. "model/fc.weight"), and the
// manifest meta stored in its root attribute "hpctrain_meta" (empty object if absent).
CheckpointState read_merged(const std::string& path);

// The manifest JSON a merged file stores (manifest less its tensor/shard tables), presented
// like a step directory's meta: the trainer's meta plus step, world_size and versions.
nlohmann::json meta_from_merged(const nlohmann::json& stored);

}  // namespace hpctrain::ckpt
