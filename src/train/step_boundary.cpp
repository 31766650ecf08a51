#include "train/step_boundary.h"

#include <ATen/ATen.h>

#include <cstring>

#include "comm/blocking.h"
#include "comm/communicator.h"

namespace hpctrain {

BoundaryVotes agree_at_boundary(Communicator& comm, const BoundaryVotes& mine) {
  if (comm.size() == 1) return mine;
  constexpr int64_t n = sizeof(BoundaryVotes) / sizeof(int64_t);
  at::Tensor t = at::empty({n}, at::kLong);
  std::memcpy(t.data_ptr<int64_t>(), &mine, sizeof(mine));
  allreduce_now(comm, t, ReduceOp::kSum, "step.boundary");
  BoundaryVotes total;
  std::memcpy(static_cast<void*>(&total), t.data_ptr<int64_t>(), sizeof(total));
  return total;
}

}  // namespace hpctrain
