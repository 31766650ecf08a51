// The NCCL backend in builds without CUDA: no factory (a CUDA device is refused, naming why) and
// no version. With CUDA, comm/nccl/nccl_communicator.cpp defines both instead.
#ifndef HPCTRAIN_HAVE_CUDA
#include "comm/nccl/nccl_communicator.h"
#include "runtime/check.h"

namespace hpctrain {

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm, int, const CommSettings&, std::shared_ptr<Watchdog>) {
  throw Error("this hpctrain was built without CUDA/NCCL; cannot communicate CUDA tensors");
}

std::string nccl_version_string() { return ""; }

}  // namespace hpctrain
#endif
