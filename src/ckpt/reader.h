// Reading and verifying checkpoints (internal to src/ckpt; the public entry points are
// read_checkpoint / find_resume / load_model in checkpoint.h).
#pragma once

#include <functional>
#include <string>

#include "ckpt/manifest.h"
#include "ckpt/store.h"

namespace hpctrain::ckpt {

// A step directory stays as is; a checkpoint root with a `latest` file, or the `latest` file
// itself (ROOT/latest), resolves to the step directory it names. A trailing slash is ignored.
// Throws hpctrain::Error if neither, or if `latest` names a directory that does not exist.
std::string resolve_checkpoint_path(const std::string& path);

// The single-file formats `ckpt merge` writes, by extension: "h5" (.h5, .hdf5), "pt" (.pt,
// .pth: a state dict or a TorchScript archive), "safetensors"; "" for anything else.
std::string merged_format_of(const std::string& path);
// True for a regular file with one of those extensions.
bool is_merged_file(const std::string& path);

// Reads every tensor of a step directory, checking completeness (every shard file, every
// manifest tensor, no unexpected dataset), each shard file's size and whole-file checksum
// (before HDF5 parses a byte of it; a mismatch names the file, and the tensor whose bytes
// differ where the manifest knows where its data lies), then each tensor's dtype, shape and
// checksum. Each tensor read is handed to `visit` (may be null) with its manifest entry.
// Throws hpctrain::Error naming the file (and the tensor) on the first failure.
Manifest verify_checkpoint(const std::string& step_dir,
                           const std::function<void(const TensorEntry&, at::Tensor)>& visit = {});

// Reads a merged .h5 file: every dataset (names as stored, e.g. "model/fc.weight"), and the
// manifest meta stored in its root attribute "hpctrain_meta" (empty object if absent).
CheckpointState read_merged(const std::string& path);

// The manifest JSON a merged file stores (manifest less its tensor/shard tables), presented
// like a step directory's meta: the trainer's meta plus step, world_size and versions (and
// tensor_xxh3, for check_merged_checksums).
nlohmann::json meta_from_merged(const nlohmann::json& stored);

// Checks the tensors of a merged file against the checksums its metadata lists (meta key
// "tensor_xxh3": {"model/fc.weight": "<16 hex>"}, written by `ckpt merge`; files without it
// are not checked), then drops that key from st.meta. Throws naming the file and tensor.
void check_merged_checksums(CheckpointState& st, const std::string& path);

}  // namespace hpctrain::ckpt
