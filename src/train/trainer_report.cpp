// Trainer::State's start-up lines (rank 0's stdout): the config, the world and the model (its
// parameter count with tied weights counted once, and which names are tied), the allreduce's
// path, the gradient communication dtype, token data, the optimizer's state per rank; and
// every rank's peak memory for the summary.
#include <cstdio>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include <cmath>

#include "runtime/device.h"
#include "train/trainer_state_impl.h"

namespace hpctrain {

void Trainer::State::report_start(double base_lr) {
  std::string tied;
  for (const auto& [alias, name] : model->tied_names()) tied += (tied.empty() ? "; " : ", ") + alias + " is " + name;
  rep->message("hpctrain train: config " + cfg.to_json().dump());
  rep->message("hpctrain train: " + std::to_string(world.size()) + " rank(s) on " + std::to_string(world.node_count()) +
               " node(s), device " + dev.str() + ", model " + cfg.model + " (" +
               std::to_string(count_parameters(*model)) + " parameters" + tied + "), " + "global batch " +
               std::to_string(global_batch) + " (" + std::to_string(cfg.batch_size) + " per rank), " +
               std::to_string(steps_per_epoch) + " steps/epoch, " + std::to_string(total_steps) + " steps, lr " +
               std::to_string(base_lr) + ", " + ddp->plan().describe() + ", " + optimizer_line());
  if (std::string d = model->describe(); !d.empty()) rep->message("hpctrain train: model " + d);
  if (world.size() > 1) {  // the allreduce's path; with ZeRO-1 its reduce_scatter's and allgather's too
    const std::vector<std::string> algos = comm->describe_algorithms();
    for (size_t i = 0; i < algos.size() && i < (ddp->zero() ? 3u : 1u); ++i) rep->message("hpctrain train: " + algos[i]);
    // The dtype the reducer actually hands the buckets over in, and how 16-bit sums travel.
    rep->message("hpctrain train: " + ddp->reducer().describe_comm());
    const at::ScalarType wire = ddp->reducer().wire_dtype();
    for (const std::string& a : algos)
      if ((wire == at::kBFloat16 || wire == at::kHalf) && a.rfind("half types:", 0) == 0) rep->message("hpctrain train: " + a);
  }
  if (const DatasetInfo& inf = train->info(); inf.tokens) {
    char buf[300];
    std::snprintf(buf, sizeof buf,
                  "hpctrain train: token data %s: %lld train tokens in %lld windows of %lld (+1), %lld test windows, "
                  "vocab_size %lld%s, %lld tokens per step",
                  cfg.data.c_str(), (long long)inf.token_count, (long long)inf.size, (long long)inf.seq_len,
                  (long long)test->info().size, (long long)inf.vocab_size,
                  inf.tokenizer.empty() ? "" : (", tokenizer " + inf.tokenizer).c_str(),
                  (long long)(global_batch * inf.seq_len));
    rep->message(buf);
    rep->message("hpctrain train: " + mfu.describe());
  }
}

// "optimizer sgd, state 3.1 MiB per rank (ZeRO-1: 1/4 of 12.6 MiB, 37 elements padding)"
std::string Trainer::State::optimizer_line() const {
  char buf[200];
  double mib = static_cast<double>(opt->state_bytes()) / 1048576.0;
  if (!ddp->zero()) {
    std::snprintf(buf, sizeof(buf), "optimizer %s, state %.2f MiB per rank (replicated)", cfg.optimizer.c_str(), mib);
  } else {
    const ZeroPartition& z = ddp->zero_partition();
    std::snprintf(buf, sizeof(buf),
                  "optimizer %s, state %.2f MiB per rank (ZeRO-1: 1/%d of it, %lld padding element(s))",
                  cfg.optimizer.c_str(), mib, z.world_size, static_cast<long long>(z.padding()));
  }
  return buf;
}

// Collective: every rank's peak memory (CUDA allocator peak, or peak RSS on CPU), by rank.
std::vector<double> Trainer::State::peak_memory_per_rank() {
  at::Tensor mine = at::full({1}, peak_memory_mb(dev), at::kDouble);
  std::vector<at::Tensor> parts{mine};
  if (world.size() > 1) comm->allgather(mine, &parts, "summary.peak_mem")->wait();
  std::vector<double> out;
  for (const auto& t : parts) out.push_back(std::round(t.item<double>() * 10) / 10);
  return out;
}

}  // namespace hpctrain
