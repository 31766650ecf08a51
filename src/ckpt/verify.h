// Verification of a checkpoint step directory (internal to src/ckpt).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>

#include "ckpt/manifest.h"

namespace hpctrain::ckpt {

// Reads every tensor of a step directory, checking completeness (every shard file, every
// manifest tensor, no unexpected dataset), each shard file's size and whole-file checksum
// (before HDF5 parses a byte of it; a mismatch names the file, and the tensor whose bytes
// differ where the manifest knows where its data lies), then each tensor's dtype, shape and
// checksum. Each tensor read is handed to `visit` (may be null) with its manifest entry.
// Throws hpctrain::Error naming the file (and the tensor) on the first failure; the message
// carries no raw bytes from a damaged file.
Manifest verify_checkpoint(const std::string& step_dir,
                           const std::function<void(const TensorEntry&, at::Tensor)>& visit = {});

}  // namespace hpctrain::ckpt
