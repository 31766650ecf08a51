// What the user sees: progress lines, the metrics file, and the summary line.
//
// Contract:
// - Only rank 0 prints and writes. Progress lines go to stdout at each log interval: plain
//   lines when stdout is not a terminal (Slurm logs), one updating line when it is.
// - The metrics file (JSON lines) starts with {"type":"config",...} holding the effective
//   configuration, then one {"type":"train",...} per log interval (with "per_rank": rank r's
//   step_s, data_wait_s, compute_s, optimizer_s, comm_blocked_s, wait_s per step over the
//   interval, "straggler" when a rank is named (metrics/straggler_watch.h), and "loss_scale"
//   under fp16) and one {"type":"eval",...} per evaluation, one
//   {"type":"checkpoint","step","stall_ms","write_ms","bytes","async", "final"} per committed checkpoint (stall: time
//   the training loop was blocked by it; write: the write itself, in the background when async; final: the save at the
//   end of the run or at preemption), and {"type":"summary",...} at the end. Lines are flushed as written.
// - TensorBoard (open_tensorboard): every record given to metrics() also goes to a
//   TensorBoardSink (metrics/tensorboard_sink.h), with or without a metrics file.
// The metrics/ stage among the others, its threads and locks: docs/architecture.md.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace hpctrain {

class TensorBoardSink;

struct ProgressLine {
  int64_t epoch, epochs, step, total_steps;
  double loss, lr, samples_per_s, data_wait_pct, comm_wait_pct, eta_s;
  std::string note = {};    // appended after " | " when not empty (e.g. the straggler report)
  double tokens_per_s = 0;  // language models: shown instead of samples/s when > 0
  double mfu = -1;          // model FLOPs utilization (a fraction), shown as "MFU x.x%" when >= 0
};

class Reporter {
 public:
  explicit Reporter(bool is_root);
  // Creates (truncates) the metrics file and writes the config record (to TensorBoard too, if
  // open, even when `path` is ""; "" creates no file). Call it
  // once every input is validated, so a run that fails at set-up leaves an old file intact.
  // Throws hpctrain::Error (rank 0 only) if the file cannot be written.
  // `append` (a run restarted by its launcher, HPCTRAIN_RESTART): the file is continued, not
  // replaced, so the failed run's records stay before the new run's.
  void open_metrics(const std::string& path, const nlohmann::json& config, bool append = false);
  // Starts a new TensorBoard event file in `dir` ("" starts none) for a run that begins after
  // `start_step` steps (0, or the step it resumed at). Call it before open_metrics so that the
  // config record reaches it. Throws hpctrain::Error (rank 0 only) if `dir` is not writable.
  void open_tensorboard(const std::string& dir, int64_t start_step);
  ~Reporter();
  void progress(const ProgressLine& p);
  void metrics(const nlohmann::json& record);  // adds nothing; one line, one TensorBoard event
  void message(const std::string& text);       // a plain line (rank 0), ends any updating line
  // The last stdout line of rank 0 (contract): one JSON object.
  void summary(const nlohmann::json& s);

 private:
  void end_live_line();
  bool root_, tty_, live_ = false;
  std::FILE* metrics_ = nullptr;
  std::unique_ptr<TensorBoardSink> tb_;
};

std::string format_duration(double seconds);

}  // namespace hpctrain
