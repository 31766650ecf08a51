// BatchMover's CUDA path (compiled only in CUDA builds): pinned memory, copy stream, event.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "dataset/transfer.h"

namespace hpctrain {

BatchMover::BatchMover(c10::Device device) : device_(device) {
  if (device.is_cuda())
    copy_stream_ =
        std::make_shared<c10::cuda::CUDAStream>(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index()));
}

std::shared_ptr<void> BatchMover::start(Batch& b) {
  if (!device_.is_cuda()) return nullptr;
  auto& stream = *static_cast<c10::cuda::CUDAStream*>(copy_stream_.get());
  c10::cuda::CUDAGuard device_guard(device_.index());  // the producer thread's own current device
  c10::cuda::CUDAStreamGuard stream_guard(stream);
  // A pageable source would make the driver stage the copy synchronously; pinned memory lets it
  // run asynchronously on the copy stream. PyTorch's pinned allocator keeps the host block alive
  // until the copy that used it completes.
  for (at::Tensor* t : {&b.images, &b.labels, &b.valid}) *t = t->pin_memory().to(device_, /*non_blocking=*/true);
  auto ready = std::make_shared<at::cuda::CUDAEvent>();
  ready->record(stream);
  return ready;
}

void BatchMover::finish(Batch& b, const std::shared_ptr<void>& token) {
  if (!token) return;
  auto current = c10::cuda::getCurrentCUDAStream(device_.index());
  // The GPU waits, not the host.
  static_cast<at::cuda::CUDAEvent*>(token.get())->block(current);
  // The tensors were allocated on the copy stream; without this the allocator could hand their
  // memory to the next copy while compute on `current` still reads it.
  for (at::Tensor* t : {&b.images, &b.labels, &b.valid})
    c10::cuda::CUDACachingAllocator::recordStream(t->storage().data_ptr(), current);
}

}  // namespace hpctrain
