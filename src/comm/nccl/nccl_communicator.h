// The NCCL backend: CUDA tensors over NCCL, bootstrapped with rank 0's unique id over MPI_Bcast.
// Built from comm/nccl/nccl_communicator.cpp in CUDA builds; in builds without CUDA,
// comm/nccl/nccl_nocuda.cpp (beside it) defines the same two functions.
//
// Contract:
// - make_nccl_communicator(parent, cuda_device, settings, watchdog): a Communicator on its own
//   CUDA stream over the ranks of `parent` (collective over `parent`). `watchdog` may be null.
//   Without CUDA it throws hpctrain::Error saying so.
// - nccl_version_string(): "2.28.3", or "" when built without CUDA.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "comm/comm_settings.h"
#include "comm/communicator.h"

namespace hpctrain {

class Watchdog;

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm parent, int cuda_device, const CommSettings& settings,
                                                     std::shared_ptr<Watchdog> watchdog);
std::string nccl_version_string();

}  // namespace hpctrain
