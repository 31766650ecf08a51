// empty_unpooled: mmap for large tensors, munmap in the deleter.
#include "runtime/host_tensor.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <sys/mman.h>

namespace hpctrain {

at::Tensor empty_unpooled(at::IntArrayRef shape, at::ScalarType dtype) {
  const size_t n = static_cast<size_t>(c10::multiply_integers(shape)) * c10::elementSize(dtype);
  if (n < (size_t{1} << 20)) return at::empty(shape, at::TensorOptions(dtype));
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return at::empty(shape, at::TensorOptions(dtype));
  return at::from_blob(p, shape, [n](void* q) { ::munmap(q, n); }, at::TensorOptions(dtype));
}

}  // namespace hpctrain
