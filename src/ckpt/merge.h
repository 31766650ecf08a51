// `hpctrain ckpt merge` and `ckpt inspect` as library calls (the CLI only parses flags).
#pragma once

#include <string>
#include <vector>

namespace hpctrain::ckpt {

struct MergeOptions {
  bool full = false;   // also the optim/ and state/ groups (h5 only)
  std::string dtype;   // "", "fp16" or "bf16": cast floating tensors for deployment
  std::string format;  // "" = from the extension of `out`; h5, pt, safetensors, torchscript
};

struct MergeReport {
  std::string format;  // what was written
  size_t tensors = 0;
  std::vector<std::string> kept;  // with --dtype: tensors left as they are ("name (int64)")
};

// The format for `out` and an explicit --format (may be empty): the extension decides
// (.h5/.hdf5 -> h5, .pt/.pth -> pt, .safetensors -> safetensors); --format overrides an
// unknown extension; torchscript goes with .pt/.pth. Throws hpctrain::Error for an unknown
// extension without --format, an unknown --format, or a --format the extension contradicts.
std::string merge_format(const std::string& out, const std::string& format);

// Verifies the checkpoint at `path` (step dir, root, or ROOT/latest) and writes `out`:
// - h5: one HDF5 file, group model/ with one dataset per tensor under its dotted name
//   (model/features.0.weight), optim/ and state/ with `full`; root attribute "hpctrain_meta"
//   holds the manifest JSON without the tensor list. Same dtype encoding as the shards.
// - pt: a plain PyTorch state dict of the model tensors (state_dict_pt.h):
//   model.load_state_dict(torch.load(out)) in Python, weights_only=True, strict.
// - safetensors: the model tensors (safetensors.h): safetensors.torch.load_file(out).
// - torchscript: a LibTorch module archive for torch::load(module, out) in C++.
// Every format carries the metadata `hpctrain eval` rebuilds the model from, and the xxh3 of
// each tensor written (read_checkpoint checks them). Written to out + ".tmp", fsynced and
// renamed, so `out` is never half written; its directory must exist.
// Memory: the tensors are streamed, one at a time, from the shards into the file (planned from
// the manifest; --dtype adds a first pass for the cast tensors' checksums, as does --full of a
// ZeRO checkpoint for the unsharded state), so the peak is about the largest tensor of the
// checkpoint (with --dtype, plus its cast), whatever the model's size; torchscript alone holds
// every model tensor until the archive is written.
MergeReport merge_checkpoint(const std::string& path, const std::string& out, const MergeOptions& opts);

// Human-readable summary: step, epoch, world size, versions, config summary and a table of
// tensors (name, dtype, shape, shard, size). Verifies nothing (use verify for that).
std::string inspect_checkpoint(const std::string& path);

}  // namespace hpctrain::ckpt
