// Distributed evaluation: every test sample counted exactly once.
//
// Contract: collective. On token data a sample is a window and its loss and accuracy are per-token
// means over it (train/loss.h), so the results are per-token means over every test window. The model is put in eval
// mode under no-grad; each rank evaluates its share; the sampler's padding duplicates are masked out (Batch.valid);
// loss sum, correct count and sample count are summed across ranks in fp64, so `samples` equals the dataset size.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "dataset/dataset_info.h"

namespace hpctrain {

class Communicator;
class Loader;
class Loss;
class Model;

struct EvalResult {
  double loss = 0;      // mean loss over the dataset
  double accuracy = 0;  // correct / samples (classification losses); NaN for regression
  int64_t samples = 0;
};

using Forward = std::function<at::Tensor(const at::Tensor&)>;

EvalResult evaluate(Model& model, const Forward& forward, const Loss& loss, Loader& loader, Communicator& comm);

// Token data: adds test_ppl = exp(test loss) and, with the "bytes" tokenizer (one token per
// byte), bits_per_byte = test loss / ln 2 to `rec`; with another tokenizer whose files record
// text_bytes, bits_per_byte = test loss / ln 2 x tokens / text_bytes of the test split (the mean
// loss per token over the split's tokens per byte of its text). Nothing for other data.
void add_token_metrics(nlohmann::json& rec, const EvalResult& r, const DatasetInfo& info);

}  // namespace hpctrain
