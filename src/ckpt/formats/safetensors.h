// The merged safetensors file (`ckpt merge --out w.safetensors`), internal to src/ckpt.
// Format (https://github.com/huggingface/safetensors): 8 bytes little-endian header length N,
// N bytes of JSON {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {"format": "pt", "hpctrain_meta": "<json>"}} padded with spaces to a multiple
// of 8, then the tensors' raw little-endian bytes back to back (offsets relative to the end of
// the header). Python: safetensors.torch.load_file(p) -> {name: tensor}, plain dotted names.
// dtypes: F32 F64 F16 BF16 I32 I64 U8 BOOL.
#pragma once

#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/merged_writer.h"
#include "ckpt/store.h"

namespace hpctrain::ckpt {

// Streams `specs` (plain dotted names) with `meta` into `path` (ckpt/merged_writer.h): the
// header, planned from the specs, first; each tensor's bytes as add() hands it over.
std::unique_ptr<MergedFileWriter> open_safetensors(const std::string& path, const nlohmann::json& meta,
                                                   std::vector<TensorSpec> specs);

// Reads any safetensors file with those dtypes: tensors as "model/<name>", meta as meta_from_merged
// presents it (empty if the file has no hpctrain_meta). A malformed file (bad header length,
// JSON, dtype, offsets outside the data, truncated) throws hpctrain::Error naming it.
CheckpointState read_safetensors(const std::string& path);

}  // namespace hpctrain::ckpt
