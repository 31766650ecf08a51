// The merged TorchScript-module archive (`ckpt merge --format torchscript`), internal to
// src/ckpt: for C++ programs that `torch::load(module, file)`. Python users want the plain state
// dict (`.pt`, state_dict_pt.h) instead: PyTorch's torch.load(weights_only=True) refuses this
// archive. Both merge (write) and read_checkpoint (eval, load_model) use it.
//
// Layout: one archive per module path, nested by the dotted names (features -> 0 -> weight), so
// `torch::load(module, file)` fills a module of the same structure; buffers are marked as
// buffers. The root also holds a string attribute "hpctrain_meta": the manifest JSON without
// its tensor and shard tables (same content as the merged .h5's attribute), which carries the
// model name, sample shape and classes `hpctrain eval` rebuilds the model from. Module::load
// ignores keys it does not know, so the extra attribute does not disturb torch::load.
#pragma once

#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/merged_writer.h"
#include "ckpt/store.h"

namespace hpctrain::ckpt {

// Writes `model` (plain dotted names, no "model/" prefix) and `meta` to `path` (not atomic:
// the caller writes a .tmp and renames).
void write_torchscript(const std::string& path, const nlohmann::json& meta, const NamedTensors& model);

// The streaming form `ckpt merge` uses (ckpt/merged_writer.h), which streams only in name: it
// holds every tensor until close(), as LibTorch's archive writer needs the whole module.
std::unique_ptr<MergedFileWriter> open_torchscript(const std::string& path, const nlohmann::json& meta,
                                                   std::vector<TensorSpec> specs);

// Reads an archive written by write_torchscript: tensors named "model/<dotted name>" (on CPU), meta as
// meta_from_merged presents it (step, world_size, versions, plus the trainer's meta). A file that is
// not such an archive (truncated, another format, no hpctrain_meta) throws hpctrain::Error in
// one line naming the file.
CheckpointState read_torchscript(const std::string& path);

}  // namespace hpctrain::ckpt
