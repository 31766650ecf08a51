// The merged PyTorch state dict (`ckpt merge --out w.pt`), internal to src/ckpt.
//
// What Python sees: exactly what `torch.save(model.state_dict(), p)` writes for CPU tensors, so
//   model.load_state_dict(torch.load(p))            # default weights_only=True, strict
// works: a zip archive (torch's own PyTorchStreamWriter) whose data.pkl is a protocol-2 pickle
// of a collections.OrderedDict name -> tensor, each tensor rebuilt by
// torch._utils._rebuild_tensor_v2 from a storage record data/<k> (torch.FloatStorage, ...).
// No type tags, no TorchScript, nothing torch.load's weights-only unpickler refuses; names are
// plain dotted names (no "model/" or "module." prefix). Our metadata (the manifest less its
// tables, as in merged .h5 files) is one extra record, hpctrain_meta.json, which torch.load
// ignores; `hpctrain eval` rebuilds the model from it.
#pragma once

#include <c10/util/Exception.h>

#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/merged_writer.h"
#include "ckpt/store.h"

namespace hpctrain::ckpt {

// Streams `specs` (plain dotted names) and `meta` into `path` (ckpt/merged_writer.h): data.pkl
// (planned from the specs) first, each tensor's data/<k> record as add() hands it over, the
// metadata record last; torch.load reads records by name, so the order does not matter to it.
std::unique_ptr<MergedFileWriter> open_state_dict_pt(const std::string& path, const nlohmann::json& meta,
                                                     std::vector<TensorSpec> specs);

// Reads a .pt/.pth file: a state dict from write_state_dict_pt or from Python's torch.save (a
// dict of name -> tensor), or a TorchScript archive from write_torchscript. Tensors are named
// "model/<name>" on CPU; meta is meta_from_merged's view of hpctrain_meta.json (empty if absent).
// Anything else throws hpctrain::Error in one line naming the file.
CheckpointState read_pt_file(const std::string& path);

// LibTorch's errors carry a backtrace, source lines and advice paragraphs: the first sentence of
// the first line ("PytorchStreamReader failed reading zip archive: not a ZIP archive").
std::string torch_error_line(const c10::Error& e);

}  // namespace hpctrain::ckpt
