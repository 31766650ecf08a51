// Reporter: rank 0's progress lines (live or plain), the metrics JSONL, TensorBoard records
// and the summary line.
#include "metrics/progress.h"

#include <unistd.h>

#include <cstdlib>

#include "metrics/tensorboard_sink.h"
#include "runtime/check.h"

namespace hpctrain {

std::string format_duration(double s) {
  if (s < 0 || s != s) return "?";
  char buf[32];
  long t = static_cast<long>(s + 0.5);
  if (t >= 3600)
    std::snprintf(buf, sizeof(buf), "%ldh%02ldm", t / 3600, t / 60 % 60);
  else if (t >= 60)
    std::snprintf(buf, sizeof(buf), "%ldm%02lds", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof(buf), "%lds", t);
  return buf;
}

// mpirun gives ranks a pseudo-terminal even when its own output goes to a file, so under MPI
// isatty() says nothing about the user's screen: plain lines there unless HPCTRAIN_PROGRESS=live.
bool live_progress() {
  if (const char* p = std::getenv("HPCTRAIN_PROGRESS")) return std::string(p) == "live";
  bool under_mpi = std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("SLURM_STEP_ID");
  return !under_mpi && isatty(STDOUT_FILENO) != 0;
}

Reporter::Reporter(bool is_root) : root_(is_root), tty_(live_progress()) {}

void Reporter::open_metrics(const std::string& metrics_path, const nlohmann::json& config, bool append) {
  if (!root_ || metrics_) return;
  if (!metrics_path.empty()) {
    metrics_ = std::fopen(metrics_path.c_str(), append ? "a" : "w");
    if (!metrics_) throw Error("cannot write the metrics file " + metrics_path);
  }
  if (metrics_ || tb_) metrics({{"type", "config"}, {"config", config}});  // TensorBoard needs it too
}

void Reporter::open_tensorboard(const std::string& dir, int64_t start_step) {
  if (!root_ || dir.empty() || tb_) return;
  tb_ = std::make_unique<TensorBoardSink>(dir, start_step);
  message("hpctrain train: TensorBoard events go to " + tb_->path() + " (tensorboard --logdir " + dir + ")");
}

Reporter::~Reporter() {
  if (metrics_) std::fclose(metrics_);
}

void Reporter::end_live_line() {
  if (live_) std::fputc('\n', stdout);
  live_ = false;
}

void Reporter::progress(const ProgressLine& p) {
  if (!root_) return;
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "epoch %lld/%lld step %lld/%lld loss %.4f lr %.4g %.0f %s/s data-wait %.1f%% "
                "comm-blocked %.1f%% eta %s",
                (long long)p.epoch, (long long)p.epochs, (long long)p.step, (long long)p.total_steps, p.loss, p.lr,
                p.tokens_per_s > 0 ? p.tokens_per_s : p.samples_per_s, p.tokens_per_s > 0 ? "tokens" : "samples",
                p.data_wait_pct, p.comm_wait_pct, format_duration(p.eta_s).c_str());
  std::string line(buf);
  if (p.mfu >= 0) {
    char m[32];
    std::snprintf(m, sizeof m, " MFU %.2f%%", 100 * p.mfu);
    line.insert(line.find(" data-wait"), m);
  }
  if (!p.note.empty()) line += " | " + p.note;
  if (tty_) {
    std::printf("\r\033[K%s", line.c_str());
    live_ = true;
  } else {
    std::printf("%s\n", line.c_str());
  }
  std::fflush(stdout);
}

void Reporter::metrics(const nlohmann::json& record) {
  if (!root_) return;
  if (metrics_) {
    std::string line = record.dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), metrics_);
    std::fflush(metrics_);
  }
  if (tb_) tb_->record(record);
}

void Reporter::message(const std::string& text) {
  if (!root_) return;
  end_live_line();
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

void Reporter::summary(const nlohmann::json& s) {
  if (!root_) return;
  end_live_line();
  std::printf("%s\n", s.dump().c_str());
  std::fflush(stdout);
}

}  // namespace hpctrain
