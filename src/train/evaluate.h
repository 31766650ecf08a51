// Distributed evaluation: every test sample counted exactly once.
//
// Contract: collective. The model is put in eval mode under no-grad; each rank evaluates its
// share; the sampler's padding duplicates are masked out (Batch.valid); loss sum, correct count
// and sample count are summed across ranks in fp64, so `samples` equals the dataset size.
#pragma once

#include <torch/nn/module.h>

#include <functional>

namespace hpctrain {

class Communicator;
class Loader;

struct EvalResult {
  double loss = 0;      // mean cross-entropy over the dataset
  double accuracy = 0;  // correct / samples
  int64_t samples = 0;
};

using Forward = std::function<at::Tensor(const at::Tensor&)>;

EvalResult evaluate(torch::nn::Module& model, const Forward& forward, Loader& loader,
                    Communicator& comm);

}  // namespace hpctrain
