// A reader for the state-dict subset of Python pickles (internal to src/ckpt): what torch.save
// writes for a dict or collections.OrderedDict of name -> tensor (protocol 2, also 3-5), and
// what write_state_dict_pt writes. Why our own: LibTorch's JIT unpickler turns OrderedDict into
// None (it only expects one as a tensor's backward hooks), so it cannot read a state dict.
// Like torch.load(weights_only=True) it calls nothing: the only globals it knows are
// collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_parameter and the
// torch.<T>Storage types; anything else is an error naming it.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace hpctrain::ckpt {

// The bytes of record data/<key> of the archive (copied into `dst`, which has `nbytes` bytes);
// returns the record's size (the caller checks it against nbytes).
using StorageReader = std::function<size_t(const std::string& key, void* dst, size_t nbytes)>;

// Parses `pkl` (the archive's data.pkl) into (name, CPU contiguous tensor) in dict order.
// Throws hpctrain::Error "<source>: ..." on anything outside the subset (unknown opcode or
// global, a value that is not a tensor, storage bounds).
std::vector<std::pair<std::string, at::Tensor>> unpickle_state_dict(const std::string& pkl,
                                                                    const StorageReader& storage,
                                                                    const std::string& source);

// A plain pickle (what pickle.dump writes for dicts, lists, tuples, strings, numbers, None, bools:
// nanoGPT's meta.pkl) whose root is a dict: its entries with a str key and an int value, in dict
// order (other entries are parsed and left out). A global or persistent id (code or a tensor) is
// refused, so nothing is ever called. Throws hpctrain::Error "<source>: ..." on anything else.
std::vector<std::pair<std::string, int64_t>> unpickle_int_entries(const std::string& pkl, const std::string& source);

}  // namespace hpctrain::ckpt
