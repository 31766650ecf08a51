// The merged LibTorch archive (`ckpt merge --format pt`), internal to src/ckpt. Why a separate
// unit: it is the only place that links LibTorch's serializer (TorchScript containers), and
// both merge (write) and read_checkpoint (eval, load_model) use it.
//
// Layout: one archive per module path, nested by the dotted names (features -> 0 -> weight), so
// `torch::load(module, file)` fills a module of the same structure; buffers are marked as
// buffers. The root also holds a string attribute "hpctrain_meta": the manifest JSON without
// its tensor and shard tables (same content as the merged .h5's attribute), which carries the
// model name, sample shape and classes `hpctrain eval` rebuilds the model from. Module::load
// ignores keys it does not know, so the extra attribute does not disturb torch::load.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "ckpt/checkpoint.h"
#include "ckpt/store.h"

namespace hpctrain::ckpt {

// Writes `model` (plain dotted names, no "model/" prefix) and `meta` to `path` (not atomic:
// the caller writes a .tmp and renames).
void write_pt(const std::string& path, const nlohmann::json& meta, const NamedTensors& model);

// Reads an archive written by write_pt: tensors named "model/<dotted name>" (on CPU), meta as
// read_merged presents it (step, world_size, versions, plus the trainer's meta). A file that is
// not such an archive (truncated, another format, no hpctrain_meta) throws hpctrain::Error in
// one line naming the file.
CheckpointState read_pt(const std::string& path);

}  // namespace hpctrain::ckpt
