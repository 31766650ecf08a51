// The collective core of SyncBatchNorm, separate from the module so tests can drive it with
// any Communicator (including a fake one) and any world size.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "comm/communicator.h"

namespace hpctrain {

// Global per-channel batch statistics of one training forward.
struct SyncBnStats {
  at::Tensor mean;    // [C] fp64, global mean
  at::Tensor var;     // [C] fp64, global biased variance
  int64_t count = 0;  // global number of values per channel (sum over ranks of N * spatial)
};

// Training-mode batch norm over the global batch. Joins one allgather of every rank's
// per-channel (count, mean, variance) (tag `tag`) in forward and one allreduce of the
// per-channel gradient sums (tag `tag + ".backward"`) in backward when the input needs a gradient. `weight` and
// `bias` may be undefined (affine = false). `x_ok` false means this rank's input is invalid
// (`why` says how): the rank still joins the collective, then every rank throws
// hpctrain::Error naming it. Throws hpctrain::Error on every rank when the global count is
// < 2 (no variance), as torch does for one value per channel.
at::Tensor sync_batch_norm_train(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps,
                                 int64_t num_features, Communicator& comm, const std::string& tag, SyncBnStats* stats,
                                 bool x_ok = true, const std::string& why = {});

}  // namespace hpctrain
