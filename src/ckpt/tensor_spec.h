// What is known of a tensor before its bytes are (internal to src/ckpt): the HDF5 layout and
// the streaming merged-file writers are planned from these alone.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain::ckpt {

struct TensorSpec {
  std::string name;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
  size_t nbytes() const { return static_cast<size_t>(c10::multiply_integers(shape)) * c10::elementSize(dtype); }
  // The spec of a tensor, under `name`.
  static TensorSpec of(const std::string& name, const at::Tensor& t) { return {name, t.scalar_type(), t.sizes().vec()}; }
};

}  // namespace hpctrain::ckpt
