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

namespace {

struct Mapping {
  void* p;
  size_t n;
};

void unmap(void* ctx) {
  auto* m = static_cast<Mapping*>(ctx);
  ::munmap(m->p, m->n);
  delete m;
}

class UnpooledAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (n == 0) return c10::DataPtr(nullptr, cpu);
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TORCH_CHECK(p != MAP_FAILED, "unpooled_allocator: mmap of ", n, " bytes failed");
    return {p, new Mapping{p, n}, &unmap, cpu};
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
};

}  // namespace

c10::Allocator* unpooled_allocator() {
  static UnpooledAllocator a;
  return &a;
}

}  // namespace hpctrain
