// `hpctrain ckpt merge` and `ckpt inspect` as library calls (the CLI only parses flags).
#pragma once

#include <string>

namespace hpctrain::ckpt {

struct MergeOptions {
  bool full = false;         // also the optim/ and state/ groups (h5 only)
  std::string dtype;         // "", "fp16" or "bf16": cast floating tensors for deployment
  std::string format = "h5"; // "h5" or "pt"
};

// Verifies the checkpoint at `path` (step dir or root with `latest`) and writes `out`:
// - h5: one HDF5 file, group model/ with one dataset per tensor under its dotted name
//   (model/features.0.weight), optim/ and state/ with `full`; root attribute "hpctrain_meta"
//   holds the manifest JSON without the tensor list. Same dtype encoding as the shards.
// - pt: a LibTorch archive of the model tensors, nested by the dotted names (features -> 0 ->
//   weight), so torch::load(module, out) fills a module of the same structure on CPU; its root
//   string attribute "hpctrain_meta" holds the same metadata as the h5's, so read_checkpoint
//   and `hpctrain eval` accept the .pt directly (see pt_archive.h).
// Written to out + ".tmp" and renamed, so `out` is never half written.
void merge_checkpoint(const std::string& path, const std::string& out, const MergeOptions& opts);

// Human-readable summary: step, epoch, world size, versions, config summary and a table of
// tensors (name, dtype, shape, shard, size). Verifies nothing (use verify for that).
std::string inspect_checkpoint(const std::string& path);

}  // namespace hpctrain::ckpt
