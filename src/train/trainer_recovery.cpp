// Trainer::State's recovery side: the flight recorder's set-up (directory, shared job id) and a
// launcher's restart (HPCTRAIN_RESTART: the metrics file continued, the restart record).
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "comm/guard/flight_recorder.h"
#include "runtime/check.h"
#include "runtime/world.h"
#include "train/trainer_state_impl.h"

namespace hpctrain {

// HPCTRAIN_RESTART: set by a launcher that restarts a failed job (launch/local.sh
// --max-restarts): {"restart": k, "of": n, "exit_code": rc, "cause": "...", "failed_at": epoch s}.
nlohmann::json launcher_restart() {
  const char* v = std::getenv("HPCTRAIN_RESTART");
  if (!v || !*v) return nullptr;
  nlohmann::json j = nlohmann::json::parse(v, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("restart"))
    throw CollectiveError(std::string("HPCTRAIN_RESTART='") + v + "' is not the launcher's restart record (JSON)");
  return j;
}

// The step of the last train record in a metrics file (-1: none).
int64_t last_train_step(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int64_t last = -1;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("type", "") == "train") last = j.value("step", last);
  }
  return last;
}

namespace {

double epoch_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

// After the first step of a restarted run: the restart record (metrics, and a line).
void Trainer::State::report_restart(int64_t resumed_step) {
  nlohmann::json rec = {{"type", "restart"}, {"step", step}, {"resumed_step", resumed_step}};
  for (auto& [k, v] : restart.items()) rec[k] = v;
  rec["resumed_from"] = resumed_from.empty() ? std::string("nothing (started fresh)") : resumed_from;
  if (restart_last_step >= 0) rec["steps_lost"] = std::max<int64_t>(restart_last_step - resumed_step, 0);
  if (restart.contains("failed_at")) rec["recovery_s"] = epoch_seconds() - restart["failed_at"].get<double>();
  rep->metrics(rec);
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "hpctrain train: restart %lld/%lld after exit %lld: resumed at step %lld%s, training again %.1f s "
                "after the failure was noticed%s%s",
                (long long)restart.value("restart", 0), (long long)restart.value("of", 0),
                (long long)restart.value("exit_code", 0), (long long)resumed_step,
                rec.contains("steps_lost")
                    ? (" (" + std::to_string(rec["steps_lost"].get<int64_t>()) + " steps lost)").c_str()
                    : "",
                rec.value("recovery_s", -1.0), resumed_from.empty() ? "" : "; resumed from ",
                resumed_from.c_str());
  rep->message(buf);
}

// The flight recorder (comm/guard/flight_recorder.h): its directory, and a job every rank shares (rank
// 0's start time, host and pid as its id, which names the dumps' directory and sorts by start
// time; the launcher's restart number), so `hpctrain flight` tells attempts apart.
void Trainer::State::start_flight_recorder() {
  std::string dir = !cfg.ckpt_dir.empty()  ? cfg.ckpt_dir
                    : !cfg.metrics.empty() ? std::filesystem::path(cfg.metrics).parent_path().string()
                                           : std::string(".");
  if (dir.empty()) dir = ".";
  struct {
    char id[112];
    double started_at;
  } job{};
  if (world.rank() == 0) {
    job.started_at = epoch_seconds();
    const std::time_t t = static_cast<std::time_t>(job.started_at);
    std::tm utc{};
    gmtime_r(&t, &utc);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
    std::string host = world.hostname();
    for (char& c : host)
      if (c == '/' || c == ' ') c = '_';
    std::snprintf(job.id, sizeof job.id, "%s-%s-%ld", stamp, host.c_str(), static_cast<long>(getpid()));
  }
  HPC_MPI_CHECK(MPI_Bcast(&job, sizeof job, MPI_BYTE, 0, world.mpi_comm()));
  const nlohmann::json r = launcher_restart();
  FlightRecorder::get().configure(cfg.flight_records, dir, world.rank(), world.size(),
                                  {job.id, job.started_at, r.is_object() ? r.value("restart", int64_t(0)) : 0});
}

}  // namespace hpctrain
