// Random global batches, and one step's backward of this rank's share of a global batch through
// DDP: the DDP and ZeRO-1 equivalence tests (mpi/ddp/ddp_test.cpp, zero_test.cpp), where N ranks
// must end where one process trained on the whole batch ends.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstdint>
#include <vector>

#include "ddp/ddp.h"

namespace hpctrain::testing {

struct Batches {
  std::vector<at::Tensor> x, y;  // per step: the GLOBAL batch (world * per-rank rows)
};

// `steps` batches of `rows` samples: x normal with shape [rows, sample_shape...], y in [0, 5).
inline Batches make_batches(int steps, int64_t rows, std::vector<int64_t> sample_shape, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  Batches b;
  std::vector<int64_t> shape = {rows};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  for (int s = 0; s < steps; ++s) {
    b.x.push_back(at::randn(shape, gen));
    b.y.push_back(at::randint(0, 5, {rows}, gen));
  }
  return b;
}

// Backward of rank `rank`'s rows (of n equal shares) of the global batch (gx, gy), split into
// `micro` micro-batches of loss / micro; all but the last under no_sync (gradient accumulation).
template <class Model>
void ddp_backward(DistributedDataParallel& ddp, Model& m, const at::Tensor& gx, const at::Tensor& gy, int rank, int n,
                  int micro = 1) {
  int64_t rows = gx.size(0) / n, mb = rows / micro;
  at::Tensor x = gx.narrow(0, rank * rows, rows), y = gy.narrow(0, rank * rows, rows);
  for (int k = 0; k < micro; ++k) {
    at::Tensor loss = at::cross_entropy_loss(m->forward(x.narrow(0, k * mb, mb)), y.narrow(0, k * mb, mb)) / micro;
    if (k + 1 < micro) {
      auto guard = ddp.no_sync();
      ddp.backward(loss);
    } else {
      ddp.backward(loss);
    }
  }
}

}  // namespace hpctrain::testing
