// Blocking collectives: the op and its wait inside a CallerWaits scope (blocking.h).
#include "comm/blocking.h"

#include "comm/caller_waits.h"

namespace hpctrain {

void allreduce_now(Communicator& comm, at::Tensor t, ReduceOp op, std::string tag) {
  CallerWaits now;
  comm.allreduce(std::move(t), op, std::move(tag))->wait();
}

void allgather_now(Communicator& comm, at::Tensor t, std::vector<at::Tensor>* out, std::string tag) {
  CallerWaits now;
  comm.allgather(std::move(t), out, std::move(tag))->wait();
}

void broadcast_now(Communicator& comm, at::Tensor t, int root, std::string tag) {
  CallerWaits now;
  comm.broadcast(std::move(t), root, std::move(tag))->wait();
}

void reduce_scatter_now(Communicator& comm, at::Tensor input, at::Tensor output, ReduceOp op, std::string tag) {
  CallerWaits now;
  comm.reduce_scatter(std::move(input), std::move(output), op, std::move(tag))->wait();
}

void allgather_into_now(Communicator& comm, at::Tensor input, at::Tensor output, std::string tag) {
  CallerWaits now;
  comm.allgather_into(std::move(input), std::move(output), std::move(tag))->wait();
}

}  // namespace hpctrain
