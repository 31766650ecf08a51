// The words and records of a run (run_report.h). The trainer gathers the figures; this file
// only formats them.
#include "metrics/run_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "metrics/step_stats.h"

namespace hpctrain {
namespace {

std::string fixed(double v, int chars) { return std::to_string(v).substr(0, chars); }

}  // namespace

void add_token_metrics(nlohmann::json& rec, double test_loss, const DatasetInfo& info) {
  if (!info.tokens) return;
  rec["test_ppl"] = std::exp(test_loss);
  if (info.tokenizer == "bytes") {
    rec["bits_per_byte"] = test_loss / std::log(2.0);
  } else if (info.text_bytes > 0) {  // nats per token x tokens per byte of the split's text
    rec["bits_per_byte"] = test_loss / std::log(2.0) * double(info.token_count) / double(info.text_bytes);
  }
}

nlohmann::json eval_record(int64_t step, int64_t epoch, double loss, double accuracy, int64_t samples,
                           const DatasetInfo& test) {
  nlohmann::json rec = {{"type", "eval"},    {"step", step},   {"epoch", epoch}, {"test_loss", loss},
                        {"test_accuracy", accuracy}, {"samples", samples}};
  add_token_metrics(rec, loss, test);
  return rec;
}

std::string eval_line(const nlohmann::json& rec, bool classification, bool tokens) {
  std::string extra;
  if (classification) extra += ", accuracy " + fixed(rec["test_accuracy"].get<double>(), 6);
  if (rec.contains("test_ppl")) extra += ", perplexity " + fixed(rec["test_ppl"].get<double>(), 7);
  if (rec.contains("bits_per_byte")) extra += ", " + fixed(rec["bits_per_byte"].get<double>(), 6) + " bits/byte";
  char buf[240];
  std::snprintf(buf, sizeof(buf), "eval after epoch %lld (step %lld): test loss %.4f%s (%lld %s)",
                (long long)rec["epoch"].get<int64_t>() + 1, (long long)rec["step"].get<int64_t>(),
                rec["test_loss"].get<double>(), extra.c_str(), (long long)rec["samples"].get<int64_t>(),
                tokens ? "windows" : "samples");
  return buf;
}

nlohmann::json interval_record(const IntervalReport& iv, int64_t step, int64_t epoch, double lr, double peak_mem_mb,
                               int64_t seq_len) {
  nlohmann::json rec = {{"type", "train"},
                        {"step", step},
                        {"epoch", epoch},
                        {"lr", lr},
                        {"loss", iv.loss},
                        {"samples_per_s", iv.samples_per_s},
                        {"data_wait_pct", iv.data_wait_pct},
                        {"comm_blocked_pct", iv.comm_wait_pct},
                        {"step_s", iv.step_s},
                        {"peak_mem_mb", peak_mem_mb},
                        {"per_rank", iv.per_rank_json()}};
  if (seq_len > 0) rec["tokens_per_s"] = iv.samples_per_s * static_cast<double>(seq_len);
  return rec;
}

nlohmann::json summary_record(const RunSummary& s) {
  const std::vector<double>& peaks = s.peak_mem_mb_per_rank;
  nlohmann::json j = {{"world_size", s.world_size},
                      {"device", s.device},
                      {"model", s.model},
                      {"parameters", s.parameters},
                      {"steps", s.steps},
                      {"epochs", s.epochs},
                      {"global_batch", s.global_batch},
                      {"samples_per_s", s.samples_per_s},
                      {"train_loss", s.train_loss},
                      {"test_loss", s.test_loss},
                      {"test_accuracy", s.test_accuracy},
                      {"data_wait_pct", s.data_wait_pct},
                      {"comm_blocked_pct", s.comm_blocked_pct},
                      {"peak_mem_mb", peaks.empty() ? 0.0 : *std::max_element(peaks.begin(), peaks.end())},
                      {"peak_mem_mb_per_rank", peaks},
                      {"zero", s.zero},
                      {"optim_state_bytes_per_rank", s.optim_state_bytes_per_rank},
                      {"model_state_bytes_per_rank", s.model_state.to_json()},
                      {"grad_comm_dtype", s.grad_comm_dtype},  // what the gradients travelled in
                      {"bytes_reduced", s.bytes_reduced},
                      {"wall_s", s.wall_s},
                      {"straggler", s.straggler},
                      {"restarts", s.restarts}};
  if (s.bytes_gathered_per_step >= 0) {
    j["bytes_gathered_per_step"] = s.bytes_gathered_per_step;
    j["gather_dtype"] = s.gather_dtype;
  }
  if (s.snapshots_taken >= 0) {
    j["snapshots_taken"] = s.snapshots_taken;
    j["snapshots_skipped"] = s.snapshots_skipped;
  }
  j["activation_checkpointing"] = s.checkpointed_units > 0;
  if (s.checkpointed_units > 0) {
    // What the recompute cost: its host seconds and their share of the run's wall time.
    j["checkpointed_units"] = s.checkpointed_units;
    j["recomputed_units"] = s.recomputed_units;
    j["recompute_s"] = s.recompute_s;
    j["recompute_pct"] = s.wall_s > 0 ? 100.0 * s.recompute_s / s.wall_s : 0.0;
  }
  if (s.seq_len > 0) {
    j["tokens_per_s"] = s.samples_per_s * static_cast<double>(s.seq_len);
    if (s.mfu >= 0) j["mfu"] = s.mfu;
    add_token_metrics(j, s.test_loss, s.test);
  }
  if (!s.trained) {
    // No step ran here: there is no loss or throughput to report (not 0.0).
    j["nothing_to_train"] = true;
    j["samples_per_s"] = nullptr;
    if (j.contains("tokens_per_s")) j["tokens_per_s"] = nullptr;
    if (j.contains("mfu")) j["mfu"] = nullptr;
    j["train_loss"] = nullptr;
  }
  return j;
}

std::string oom_line(const std::string& device, int64_t step, int64_t batch_size, double in_use_mb, double peak_mb) {
  char buf[320];
  std::snprintf(buf, sizeof(buf),
                "out of memory on %s at step %lld with per-rank batch %lld (%.0f MiB in use, "
                "peak %.0f MiB); try a smaller --batch-size, --amp bf16 or fp16, or "
                "--grad-accum K to split each batch",
                device.c_str(), (long long)step, (long long)batch_size, in_use_mb, peak_mb);
  return buf;
}

std::string token_data_line(const std::string& dir, const DatasetInfo& inf, const DatasetInfo& test,
                            int64_t global_batch) {
  char buf[300];
  std::snprintf(buf, sizeof buf,
                "token data %s: %lld train tokens in %lld windows of %lld (+1), %lld test windows, "
                "vocab_size %lld%s, %lld tokens per step",
                dir.c_str(), (long long)inf.token_count, (long long)inf.size, (long long)inf.seq_len,
                (long long)test.size, (long long)inf.vocab_size,
                inf.tokenizer.empty() ? "" : (", tokenizer " + inf.tokenizer).c_str(),
                (long long)(global_batch * inf.seq_len));
  return buf;
}

std::string activation_checkpointing_line(int64_t units) {
  return "activation checkpointing on for " + std::to_string(units) +
         " units: each keeps only its input and is recomputed in backward (one more forward of the units per step)";
}

nlohmann::json ModelStateBytes::to_json() const {
  return {{"stage", stage},
          {"parameters", parameters},
          {"gradients", gradients},
          {"gradients_peak", gradients_peak},
          {"optimizer_state", optimizer_state},
          {"largest_unit", largest_unit},
          {"total", total()}};
}

std::string model_state_line(const ModelStateBytes& m) {
  auto mib = [](int64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(b) / 1048576.0);
    return std::string(buf);
  };
  std::string s = "model state per rank (" + (m.stage == 0 ? std::string("DDP") : "ZeRO-" + std::to_string(m.stage)) +
                  "): parameters " + mib(m.parameters) + ", gradients " + mib(m.gradients);
  if (m.stage == 2) s += " (the shard; plus the buckets in flight during backward)";
  s += ", optimizer state " + mib(m.optimizer_state) + ", largest gathered unit ";
  s += m.stage >= 3 ? mib(m.largest_unit) : "none (stage " + std::to_string(m.stage) + " gathers none)";
  return s + ", total " + mib(m.total()) + " (" + std::to_string(m.total()) + " bytes)";
}

std::string optimizer_line(const std::string& optimizer, int64_t state_bytes, int zero_world, int64_t padding,
                           int stage) {
  char buf[200];
  double mib = static_cast<double>(state_bytes) / 1048576.0;
  if (zero_world <= 0)
    std::snprintf(buf, sizeof(buf), "optimizer %s, state %.2f MiB per rank (replicated)", optimizer.c_str(), mib);
  else
    std::snprintf(buf, sizeof(buf),
                  "optimizer %s, state %.2f MiB per rank (ZeRO-%d: 1/%d of it, %lld padding element(s))",
                  optimizer.c_str(), mib, stage, zero_world, static_cast<long long>(padding));
  return buf;
}

}  // namespace hpctrain
