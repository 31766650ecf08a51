// TensorBoardSink: the metrics records (see metrics/progress.h) as TensorBoard event files.
//
// Contract:
// - tensorboard_scalars(record) is the mapping, the same for every record it is fed: for a
//   record of type train, eval, checkpoint or restart, every numeric field except "step" and "epoch"
//   becomes the scalar "<type>/<field>" (e.g. train/loss, eval/test_accuracy,
//   checkpoint/stall_ms); a nested object's numeric fields become "<type>/<field>/<sub>"; the
//   array "per_rank" (element r: rank r's numbers) becomes "rank/<r>/<sub>". Booleans, strings
//   and other record types give no scalars.
// - The constructor opens a new event file in `dir` (EventFileWriter: throws hpctrain::Error
//   if the directory or file cannot be created) and writes SessionLog START at start_step + 1:
//   TensorBoard then drops what an earlier session in the same directory logged after the
//   checkpoint this run resumed from (start_step), so resumed curves join without overlap.
// - record(r): "config" -> text summary "config" (Markdown table of the effective config) at
//   start_step; train/eval/checkpoint -> one Event with their scalars at r["step"];
//   "summary" -> text summary "summary" at the run's last step; "restart" (a launcher restarted
//   the job) -> text summary "restart" (its fields as a Markdown table) and its scalars
//   (restart/recovery_s, restart/steps_lost, ...) at r["step"]. Every record is flushed, so a
//   running job is visible live and a killed one loses at most the record being written.
// - record() never throws. The first failed write (full disk, ...) prints one warning line on
//   stderr and turns the sink off; the run goes on.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace hpctrain {

class EventFileWriter;

std::vector<std::pair<std::string, double>> tensorboard_scalars(const nlohmann::json& record);

class TensorBoardSink {
 public:
  TensorBoardSink(const std::string& dir, int64_t start_step);
  ~TensorBoardSink();
  void record(const nlohmann::json& r);
  const std::string& path() const;
  bool active() const { return active_; }

 private:
  std::unique_ptr<EventFileWriter> file_;
  int64_t start_step_, last_step_;
  bool active_ = true;
};

}  // namespace hpctrain
