// What a person reads of a training run, formatted in one place: the eval line and record, the
// interval's metrics record, the summary record, the out-of-memory line and the start-up lines
// about token data and the optimizer. Pure functions of plain values: the trainer gathers the
// figures, this file words them (metrics/progress.h prints and writes them).
//
// Contract:
// - Records are the metrics JSONL contract (README "Metrics"): key names and units never change
//   silently. Absent figures are omitted or null, never 0.
// - Lines are one line each, no trailing newline.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataset/dataset_info.h"

namespace hpctrain {

struct IntervalReport;

// Token data: test_ppl = exp(test loss) and, with the "bytes" tokenizer (one token per byte),
// bits_per_byte = test loss / ln 2, added to `rec`; with another tokenizer whose files record
// text_bytes, bits_per_byte = test loss / ln 2 x tokens / text_bytes of the test split (the mean
// loss per token over the split's tokens per byte of its text). Nothing for other data.
void add_token_metrics(nlohmann::json& rec, double test_loss, const DatasetInfo& info);

// {"type":"eval", step, epoch, test_loss, test_accuracy, samples (+ token metrics)}.
nlohmann::json eval_record(int64_t step, int64_t epoch, double loss, double accuracy, int64_t samples,
                           const DatasetInfo& test);
// "eval after epoch 2 (step 40): test loss 0.4123, accuracy 0.8512 (10000 samples)" from it.
std::string eval_line(const nlohmann::json& rec, bool classification, bool tokens);

// {"type":"train", step, epoch, lr, loss, samples_per_s, data_wait_pct, comm_blocked_pct,
// step_s, peak_mem_mb, per_rank}; tokens_per_s when `seq_len` > 0 (token data).
nlohmann::json interval_record(const IntervalReport& iv, int64_t step, int64_t epoch, double lr, double peak_mem_mb,
                               int64_t seq_len);

// Model state one rank holds, in bytes, measured from the run's tensors: parameters (under ZeRO
// the padded flat buckets), gradients (bucket buffers and shard; ZeRO-2: the shard, plus any
// .grad not yet taken), gradients_peak (the most the reducer held during the last synchronized
// backward: the shard plus the buckets in flight; 0 before a step), the optimizer state, and the
// largest unit gathered at once (stage 3; 0 for stages 0-2, which gather none).
struct ModelStateBytes {
  int64_t stage = 0, parameters = 0, gradients = 0, gradients_peak = 0, optimizer_state = 0, largest_unit = 0;
  int64_t total() const { return parameters + gradients + optimizer_state + largest_unit; }
  nlohmann::json to_json() const;
};
// "model state per rank (ZeRO-2): parameters 3.15 MiB, gradients 1.58 MiB, optimizer state 3.15 MiB,
// largest gathered unit none (stage 2 gathers none), total 7.88 MiB"
std::string model_state_line(const ModelStateBytes& m);

// The figures of the summary record (README "Metrics": the summary).
struct RunSummary {
  int world_size = 1;
  std::string device, model;
  int64_t parameters = 0, steps = 0, epochs = 0, global_batch = 0;
  bool trained = true;  // false: no step ran here (a resumed run already at its end)
  double samples_per_s = 0, train_loss = 0, test_loss = 0, test_accuracy = 0;
  double data_wait_pct = 0, comm_blocked_pct = 0;
  std::vector<double> peak_mem_mb_per_rank;
  int64_t zero = 0, optim_state_bytes_per_rank = 0, bytes_reduced = 0;
  ModelStateBytes model_state;  // rank 0's (every rank holds equal shares)
  std::string grad_comm_dtype;
  // --zero 3: the parameter bytes this rank handed to the all-gathers in the last step (< 0: omitted).
  int64_t bytes_gathered_per_step = -1;
  std::string gather_dtype;  // --zero 3: what the units' matrices were gathered in
  double wall_s = 0;
  nlohmann::json straggler;
  int64_t restarts = 0;
  // --snapshot-every: snapshots taken and skipped (a write or copy still in flight); < 0: off, omitted.
  int64_t snapshots_taken = -1, snapshots_skipped = -1;
  // --activation-checkpointing: the model's units (0: off) and this rank's recompute forwards
  // in backward, their count and host seconds (model/checkpoint_unit.h recompute_totals).
  int64_t checkpointed_units = 0, recomputed_units = 0;
  double recompute_s = 0;
  int64_t seq_len = 0;  // token data: > 0 adds tokens_per_s and the token metrics
  double mfu = -1;      // model FLOPs utilization (train/mfu.h); < 0: not measured, omitted
  DatasetInfo test;     // for the token metrics
};
nlohmann::json summary_record(const RunSummary& s);

// "out of memory on cuda:0 at step 12 with per-rank batch 256 (...); try ..."
std::string oom_line(const std::string& device, int64_t step, int64_t batch_size, double in_use_mb, double peak_mb);

// "token data DIR: N train tokens in W windows of T (+1), X test windows, vocab_size V, ..."
std::string token_data_line(const std::string& dir, const DatasetInfo& train, const DatasetInfo& test,
                            int64_t global_batch);

// "activation checkpointing on for 4 units: each keeps only its input and is recomputed in backward
// (one more forward of the units per step)".
std::string activation_checkpointing_line(int64_t units);

// "optimizer sgd, state 3.1 MiB per rank (replicated)" or "(ZeRO-1: 1/4 of it, 37 padding element(s))".
std::string optimizer_line(const std::string& optimizer, int64_t state_bytes, int zero_world, int64_t padding,
                           int stage = 1);

}  // namespace hpctrain
