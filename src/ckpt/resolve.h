// Where a checkpoint path points (internal to src/ckpt; users call read_checkpoint/find_resume,
// ckpt/checkpoint.h).
#pragma once

#include <string>

namespace hpctrain::ckpt {

// A step directory stays as is; a checkpoint root with a `latest` file, or the `latest` file
// itself (ROOT/latest), resolves to the step directory it names. A trailing slash is ignored.
// Throws hpctrain::Error if neither, or if `latest` names a directory that does not exist.
// (A merged single file is recognised by ckpt/merged_file.h before this is asked.)
std::string resolve_checkpoint_path(const std::string& path);

}  // namespace hpctrain::ckpt
