// TensorBoardSink: maps metrics records to scalars (tensorboard_scalars) and text summaries
// (config and summary as Markdown tables) and writes them through EventFileWriter, flushing
// after every record.
#include "metrics/tensorboard_sink.h"

#include <algorithm>
#include <cstdio>

#include "metrics/event_file.h"
#include "runtime/check.h"

namespace hpctrain {
namespace {

using json = nlohmann::json;

void add_numbers(const std::string& prefix, const json& obj, std::vector<std::pair<std::string, double>>& out) {
  for (const auto& [k, v] : obj.items()) {
    if (v.is_number()) out.emplace_back(prefix + k, v.get<double>());
  }
}

std::string cell(const json& v) {
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out.empty() ? "\"\"" : out;
}

std::string markdown_table(const json& obj) {
  std::string md = "| key | value |\n|---|---|\n";
  for (const auto& [k, v] : obj.items()) md += "| " + k + " | " + cell(v) + " |\n";
  return md;
}

}  // namespace

std::vector<std::pair<std::string, double>> tensorboard_scalars(const json& r) {
  std::vector<std::pair<std::string, double>> out;
  std::string type = r.value("type", "");
  if (type != "train" && type != "eval" && type != "checkpoint" && type != "restart") return out;
  for (const auto& [k, v] : r.items()) {
    if (k == "step" || k == "epoch" || k == "type") continue;
    if (v.is_number()) {
      out.emplace_back(type + "/" + k, v.get<double>());
    } else if (v.is_object()) {
      add_numbers(type + "/" + k + "/", v, out);
    } else if (k == "per_rank" && v.is_array()) {
      for (size_t rank = 0; rank < v.size(); ++rank)
        if (v[rank].is_object()) add_numbers("rank/" + std::to_string(rank) + "/", v[rank], out);
    }
  }
  return out;
}

TensorBoardSink::TensorBoardSink(const std::string& dir, int64_t start_step)
    : file_(std::make_unique<EventFileWriter>(dir)), start_step_(start_step), last_step_(start_step) {
  file_->session_start(start_step + 1);
  if (!file_->flush()) throw Error("--tensorboard " + dir + ": " + file_->error());
}

TensorBoardSink::~TensorBoardSink() = default;

const std::string& TensorBoardSink::path() const { return file_->path(); }

void TensorBoardSink::record(const json& r) {
  if (!active_) return;
  try {
    std::string type = r.value("type", "");
    if (type == "config") {
      file_->text(start_step_, "config", markdown_table(r.value("config", json::object())));
    } else if (type == "summary") {
      file_->text(last_step_, "summary", markdown_table(r.value("summary", json::object())));
    } else if (type == "restart") {  // a text at the step it happened, and its numbers as scalars
      int64_t step = r.value("step", last_step_);
      last_step_ = std::max(last_step_, step);
      json fields = r;
      fields.erase("type");
      file_->text(step, "restart", markdown_table(fields));
      file_->scalars(step, tensorboard_scalars(r));
    } else {
      int64_t step = r.value("step", last_step_);
      last_step_ = std::max(last_step_, step);
      file_->scalars(step, tensorboard_scalars(r));
    }
    file_->flush();
  } catch (const std::exception& e) {  // a malformed record must not end the run either
    std::fprintf(stderr, "hpctrain: warning: TensorBoard record skipped: %s\n", e.what());
    return;
  }
  if (!file_->ok()) {
    active_ = false;
    std::fprintf(stderr, "hpctrain: warning: TensorBoard logging stopped: %s (training goes on)\n",
                 file_->error().c_str());
    std::fflush(stderr);
  }
}

}  // namespace hpctrain
