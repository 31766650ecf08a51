// Blocking collectives: submit one op and wait for it before returning (synchronous callers:
// SyncBatchNorm, metric and clip-norm reductions, votes, `hpctrain bench`).
//
// Contract:
// - Each is exactly `comm.<op>(...)->wait()`, same result, same order, same errors; all ranks
//   must call it at the same point, as for the op itself (comm/communicator.h).
// - They tell the backend that the caller waits at once, so the MPI backend runs the op on the
//   calling thread instead of waking its comm thread (saving a wake-up and a wait for a core
//   when threads outnumber cores). How it does so is the backend's business (comm/caller_waits.h
//   inside comm/); callers need nothing but these functions.
// - DDP's buckets and anything that should overlap computation use the asynchronous ops.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "comm/communicator.h"

namespace hpctrain {

void allreduce_now(Communicator& comm, at::Tensor t, ReduceOp op, std::string tag);
void allgather_now(Communicator& comm, at::Tensor t, std::vector<at::Tensor>* out, std::string tag);
void broadcast_now(Communicator& comm, at::Tensor t, int root, std::string tag);
void reduce_scatter_now(Communicator& comm, at::Tensor input, at::Tensor output, ReduceOp op, std::string tag);
void allgather_into_now(Communicator& comm, at::Tensor input, at::Tensor output, std::string tag);

}  // namespace hpctrain
