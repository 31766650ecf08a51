// Door 3: a TorchScript module saved from Python (torch.jit.script(m).save(p) or
// torch.jit.trace(m, x).save(p)) behind the model interface.
//
// Contract:
// - is_torchscript_name(s): `s` ends in .pt/.pth or names an existing file; such a --model is
//   loaded from that file instead of the registry.
// - torchscript_entry(path): the registry-style entry (origin "torchscript") whose factory loads
//   the archive's bytes, read once here. The bytes go into every checkpoint (tensor
//   state/torchscript, checksummed like every tensor), so eval and resume need only the
//   checkpoint: torchscript_factory(bytes) rebuilds the model from them.
// - The archive is checked before any data is read: a file that is not a TorchScript archive (a
//   pickled state_dict from torch.save, say) and a forward that does not take one tensor and
//   return one tensor are CollectiveErrors saying what was found and what to do.
// - Parameter and buffer names are the Python module's state_dict() names.
// - TorchScript is the only format LibTorch can train a Python-defined model from today; a
//   torch.export loader can replace this file behind the same interface.
#pragma once

#include <string>

#include "model/model.h"

namespace hpctrain {

// The checkpoint tensor that holds the archive's bytes (uint8 [n]).
inline constexpr const char* kTorchScriptTensor = "state/torchscript";

bool is_torchscript_name(const std::string& model);
ModelEntry torchscript_entry(const std::string& path);
ModelFactory torchscript_factory(std::string archive_bytes, std::string label);

}  // namespace hpctrain
