// The single-file formats `ckpt merge` writes and read_checkpoint/eval/resume read: one small
// interface in front of ckpt/merged_h5.h, ckpt/formats/state_dict_pt.h and ckpt/formats/safetensors.h, which
// know nothing of each other (internal to src/ckpt).
//
// Contract:
// - Each format streams tensors with `meta` (the manifest less its tensor and shard tables) into
//   one file, one tensor at a time (ckpt/merged_writer.h), and reads any such file back as a
//   CheckpointState whose meta looks like a step directory's (meta_from_merged).
// - The format of a path is told by its extension alone: .h5/.hdf5, .pt/.pth, .safetensors.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/merged_writer.h"
#include "runtime/named_tensors.h"

namespace hpctrain::ckpt {

struct MergedFileFormat {
  std::string name;                     // "h5" | "pt" | "safetensors"
  std::vector<std::string> extensions;  // ".h5", ".hdf5" ...
  MergedWriterOpen open;                // a streaming writer (ckpt/merged_writer.h)
  CheckpointState (*read)(const std::string& path);
};

// Every format, in the order above.
const std::vector<MergedFileFormat>& merged_file_formats();
// The format of that name, or nullptr.
const MergedFileFormat* merged_file_format(const std::string& name);

// The format name by extension ("h5", "pt", "safetensors"); "" for anything else.
std::string merged_format_of(const std::string& path);
// True for a regular file with one of those extensions.
bool is_merged_file(const std::string& path);

// The manifest JSON a merged file stores (manifest less its tensor/shard tables), presented
// like a step directory's meta: the trainer's meta plus step, world_size and versions (and
// tensor_xxh3, for check_merged_checksums).
nlohmann::json meta_from_merged(const nlohmann::json& stored);

// Checks the tensors of a merged file against the checksums its metadata lists (meta key
// "tensor_xxh3": {"model/fc.weight": "<16 hex>"}, written by `ckpt merge`; files without it
// are not checked), then drops that key from st.meta. Throws naming the file and tensor.
void check_merged_checksums(CheckpointState& st, const std::string& path);

}  // namespace hpctrain::ckpt
