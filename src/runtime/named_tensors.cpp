// split_tied: a shared tensor is the same TensorImpl under several names.
#include "runtime/named_tensors.h"

#include <unordered_map>

namespace hpctrain {

TiedSplit split_tied(const NamedTensors& all) {
  TiedSplit out;
  std::unordered_map<const void*, std::string> first;  // TensorImpl -> the name it is listed under
  for (const auto& [name, t] : all) {
    auto [it, fresh] = first.emplace(t.unsafeGetTensorImpl(), name);
    if (fresh)
      out.unique.emplace_back(name, t);
    else
      out.aliases.emplace_back(name, it->second);
  }
  return out;
}

}  // namespace hpctrain
