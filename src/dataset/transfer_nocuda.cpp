// BatchMover for builds without CUDA: batches stay on the CPU.
#ifndef HPCTRAIN_HAVE_CUDA
#include "dataset/transfer.h"
#include "runtime/check.h"

namespace hpctrain {
BatchMover::BatchMover(c10::Device device) : device_(device) {
  if (device.is_cuda()) throw Error("loader: device " + device.str() + " needs a CUDA build of hpctrain");
}
std::shared_ptr<void> BatchMover::start(Batch&) { return nullptr; }
void BatchMover::finish(Batch&, const std::shared_ptr<void>&) {}
}  // namespace hpctrain
#endif
