// Host -> device movement of batches for the loader.
//
// With a CUDA device the producer thread copies each batch into pinned host memory and issues a
// non_blocking copy on a dedicated copy stream, then records an event; the consumer makes its
// current stream wait on that event (on the GPU: the host never blocks) before using the batch.
// That overlaps the copy of batch k+1 with the compute on batch k. CPU devices: nothing happens.
// The CUDA path lives in transfer_cuda.cpp; transfer_nocuda.cpp is the fallback in CPU builds.
#pragma once

#include <c10/core/Device.h>

#include <memory>

#include "dataset/batch.h"

namespace hpctrain {

class BatchMover {
 public:
  explicit BatchMover(c10::Device device);
  // Producer thread: starts moving `b` to the device; the token orders its use (null for CPU).
  std::shared_ptr<void> start(Batch& b);
  // Consumer thread, before any use of `b`: work queued afterwards on the current stream runs
  // after the copy, and the caching allocator learns that stream uses the memory.
  void finish(Batch& b, const std::shared_ptr<void>& token);

 private:
  c10::Device device_;
  std::shared_ptr<void> copy_stream_;
};

}  // namespace hpctrain
