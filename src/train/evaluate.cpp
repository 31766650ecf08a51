// Distributed evaluation: each rank sums loss, hits and valid samples over its shard under
// no-grad; one fp64 allreduce of the three sums gives the means over the dataset.
#include "train/evaluate.h"

#include <ATen/ATen.h>

#include <ATen/core/grad_mode.h>
#include <cmath>

#include "comm/caller_waits.h"
#include "comm/communicator.h"
#include "dataset/loader.h"
#include "model/model.h"
#include "runtime/trace.h"
#include "train/loss.h"

namespace hpctrain {

EvalResult evaluate(Model& model, const Forward& forward, const Loss& loss, Loader& loader, Communicator& comm) {
  TraceSpan span("eval", "eval");
  bool was_training = model.is_training();
  model.train(false);
  double loss_sum = 0, correct = 0, count = 0;
  {
    at::NoGradGuard no_grad;
    loader.start_epoch(0);
    while (auto batch = loader.next()) {
      at::Tensor logits = forward(batch->images).to(at::kFloat);
      at::Tensor valid = batch->valid.to(logits.device());
      at::Tensor losses = loss.per_sample(logits, batch->labels);
      loss_sum += losses.masked_select(valid).sum().item<double>();
      if (loss.classification())
        correct += loss.correct(logits, batch->labels).masked_select(valid).sum().item<double>();
      count += valid.sum().item<double>();
    }
  }
  at::Tensor sums = at::tensor({loss_sum, correct, count}, at::kDouble);
  CallerWaits now;  // waited at once: runs on this thread (comm/caller_waits.h)
  comm.allreduce(sums, ReduceOp::kSum, "eval.sums")->wait();
  model.train(was_training);
  EvalResult r;
  r.samples = static_cast<int64_t>(sums[2].item<double>());
  r.loss = r.samples ? sums[0].item<double>() / r.samples : 0;
  r.accuracy = !loss.classification() ? std::nan("")  // JSON null: regression has no accuracy
               : r.samples            ? sums[1].item<double>() / r.samples
                                      : 0;
  return r;
}

}  // namespace hpctrain

namespace hpctrain {

void add_token_metrics(nlohmann::json& rec, const EvalResult& r, const DatasetInfo& info) {
  if (!info.tokens) return;
  rec["test_ppl"] = std::exp(r.loss);
  if (info.tokenizer == "bytes") {
    rec["bits_per_byte"] = r.loss / std::log(2.0);
  } else if (info.text_bytes > 0) {  // nats per token x tokens per byte of the split's text
    rec["bits_per_byte"] = r.loss / std::log(2.0) * double(info.token_count) / double(info.text_bytes);
  }
}

}  // namespace hpctrain
