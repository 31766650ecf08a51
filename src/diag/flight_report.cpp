// flight_report: picks one job's directory of dumps (the newest, or the one asked for), reads
// every rank-<r>.json in it, checks they are one job, then per lane compares the ranks' records
// by sequence number: finished, entered, first disagreement, time stuck.
#include "diag/flight_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "runtime/check.h"

namespace hpctrain {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string ranks_text(const std::vector<int>& v) {
  if (v.empty()) return "none";
  std::string s;
  for (int r : v) s += (s.empty() ? "" : ",") + std::to_string(r);
  return (v.size() == 1 ? "rank " : "ranks ") + s;
}

std::string op_text(const json& r) {
  std::string s = "#" + std::to_string(r["seq"].get<uint64_t>()) + " " + r["op"].get<std::string>() + "(" +
                  r["dtype"].get<std::string>() + ", " + std::to_string(r["numel"].get<int64_t>()) + ")";
  if (!r["tag"].get<std::string>().empty()) s += " from " + r["tag"].get<std::string>();
  return s;
}

const std::regex& dump_name() {
  static const std::regex pat("rank-([0-9]+)\\.json");
  return pat;
}

bool holds_dumps(const fs::path& d) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(d, ec))
    if (std::regex_match(e.path().filename().string(), dump_name())) return true;
  return false;
}

// A directory of one job's dumps: its id, restart number and start time as its dumps say
// (dumps written before they carried a start time: the first dump's time), read leniently (a
// damaged file is reported only when this job is the one read).
struct JobDir {
  fs::path dir;
  std::string id;
  int64_t restart = 0;
  double started_at = 0;
};

JobDir job_dir(const fs::path& d) {
  JobDir j{d, d.filename().string(), 0, std::numeric_limits<double>::infinity()};
  std::error_code ec;
  bool have_start = false;
  for (const auto& e : fs::directory_iterator(d, ec)) {
    if (!std::regex_match(e.path().filename().string(), dump_name())) continue;
    json x = json::parse(std::ifstream(e.path()), nullptr, /*allow_exceptions=*/false);
    if (!x.is_object()) continue;
    if (x.contains("job") && x["job"].is_string()) j.id = x["job"].get<std::string>();
    if (x.contains("restart") && x["restart"].is_number_integer()) j.restart = x["restart"].get<int64_t>();
    if (x.contains("started_at") && x["started_at"].is_number() && x["started_at"].get<double>() > 0) {
      j.started_at = x["started_at"].get<double>(), have_start = true;
    } else if (!have_start && x.contains("dumped_at") && x["dumped_at"].is_number()) {
      j.started_at = std::min(j.started_at, x["dumped_at"].get<double>());
    }
  }
  if (!std::isfinite(j.started_at)) j.started_at = 0;
  return j;
}

std::string job_text(const JobDir& j) {
  return j.id + (j.restart > 0 ? " (restart " + std::to_string(j.restart) + ")" : "");
}

// The directory whose dumps to read: DIR itself when it holds dumps (one job's directory, or
// the layout without per-job directories), else the newest job directory under it, or the one
// `job` names (its directory name or id). `others` gets a line naming the rest.
fs::path choose_job(const fs::path& dir, const std::string& job, std::string& others) {
  std::vector<JobDir> jobs;
  if (holds_dumps(dir)) jobs.push_back(job_dir(dir));
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory(ec) && holds_dumps(e.path())) jobs.push_back(job_dir(e.path()));
  if (jobs.empty())
    throw CollectiveError("no flight recorder dumps (rank-<r>.json) in " + dir.string() +
                          " (a run writes them to <ckpt dir or run dir>/flight/<job>/ on a watchdog timeout, a "
                          "desync, a fatal error or SIGUSR2)");
  std::sort(jobs.begin(), jobs.end(), [](const JobDir& a, const JobDir& b) {
    return a.started_at != b.started_at ? a.started_at > b.started_at : a.id > b.id;  // newest first
  });
  size_t pick = 0;
  if (!job.empty()) {
    pick = jobs.size();
    for (size_t i = 0; i < jobs.size() && pick == jobs.size(); ++i)
      if (jobs[i].id == job || jobs[i].dir.filename() == job) pick = i;
    if (pick == jobs.size()) {
      std::string known;
      for (const JobDir& j : jobs) known += (known.empty() ? "" : ", ") + j.id;
      throw CollectiveError("--job " + job + ": no dumps of that job in " + dir.string() + " (jobs there: " + known +
                            ")");
    }
  }
  if (jobs.size() > 1) {
    others = "flight: other jobs in " + dir.string() + " (newest first):";
    for (size_t i = 0; i < jobs.size(); ++i)
      if (i != pick) others += " " + job_text(jobs[i]) + ",";
    others.back() = ';';
    others += " read one with: hpctrain flight " + dir.string() + " --job ID\n";
  }
  return jobs[pick].dir;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

}  // namespace

std::string flight_report(const std::string& dir_in, const std::string& job_in) {
  fs::path dir = dir_in;
  std::error_code ec;
  if (fs::is_directory(dir / "flight", ec)) dir /= "flight";
  if (!fs::is_directory(dir, ec)) throw CollectiveError("" + dir_in + " is not a directory");
  std::string others;
  dir = choose_job(dir, job_in, others);
  std::map<int, json> dumps;
  std::map<int, std::string> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    std::string name = e.path().filename().string();
    if (!std::regex_match(name, m, dump_name())) continue;
    json j;
    try {
      std::ifstream in(e.path());
      j = json::parse(in);
      if (!j.contains("records") || !j.contains("job") || !j.contains("world_size")) throw std::runtime_error("fields");
    } catch (const std::exception&) {
      throw CollectiveError("" + e.path().string() + " is not a flight recorder dump");
    }
    dumps[std::stoi(m[1])] = std::move(j);
    files[std::stoi(m[1])] = e.path().string();
  }
  const std::string job = dumps.begin()->second["job"].get<std::string>();
  for (const auto& [r, j] : dumps)
    if (j["job"].get<std::string>() != job)
      throw CollectiveError("the dumps are of two different jobs: " + files.begin()->second + " (job " + job +
                            ") and " + files[r] + " (job " + j["job"].get<std::string>() +
                            "); keep one job's rank-<r>.json files in the directory");
  int world = 0;
  for (const auto& [r, j] : dumps) world = std::max(world, j["world_size"].get<int>());
  std::vector<int> present, missing;
  for (int r = 0; r < world; ++r) (dumps.count(r) ? present : missing).push_back(r);

  const int64_t restart = dumps.begin()->second.value("restart", int64_t(0));
  std::string out = "flight: job " + job + (restart > 0 ? " (restart " + std::to_string(restart) + ")" : "") + ", " +
                    std::to_string(world) + " rank(s); dumps from " + ranks_text(present) + "; missing: " +
                    ranks_text(missing) +
                    (missing.empty() ? "" : " (its host is gone, or its process was stopped or killed)") + "\n" +
                    others;
  for (int r : present) {
    const json& j = dumps[r];
    out += "flight: rank " + std::to_string(r) + " on " + j.value("host", std::string("?")) +
           " dumped: " + j.value("reason", std::string("?")) + "\n";
  }
  // States as of the first dump (when the first rank reported): an op a rank finished only after
  // that (a stopped rank that the job's abort continued: SIGCONT, then it completes the op its
  // peers had already done their part of, then dumps) was still in progress when the job stuck.
  double first_dump = std::numeric_limits<double>::infinity();
  for (int r : present) first_dump = std::min(first_dump, dumps[r]["dumped_at"].get<double>());
  for (int r : present)
    for (auto& rec : dumps[r]["records"])
      if (rec["state"] == "done" && rec["end_s"].get<double>() > first_dump) {
        rec["state"] = "started";
        rec["end_s"] = -1.0;
      }
  std::set<std::string> lanes;
  for (const auto& [r, j] : dumps)
    for (const auto& rec : j["records"]) lanes.insert(rec["lane"].get<std::string>());
  for (const std::string& lane : lanes) {
    // Per rank: its records of this lane by sequence number.
    std::map<int, std::map<uint64_t, json>> by;
    for (int r : present)
      for (const auto& rec : dumps[r]["records"])
        if (rec["lane"] == lane) by[r][rec["seq"].get<uint64_t>()] = rec;
    std::map<int, uint64_t> finished, entered;
    for (int r : present) {
      finished[r] = entered[r] = 0;
      for (const auto& [seq, rec] : by[r]) {
        const std::string st = rec["state"];
        if (st == "done" || st == "failed") finished[r] = std::max(finished[r], seq);
        if (st != "enqueued") entered[r] = std::max(entered[r], seq);
      }
    }
    out += "flight: [" + lane + "] last sequence number finished:";
    for (int r : present) out += " rank " + std::to_string(r) + " #" + std::to_string(finished[r]) + ";";
    out.back() = '\n';
    // The first op not every rank finished.
    uint64_t stuck = UINT64_MAX;
    for (int r : present) stuck = std::min(stuck, finished[r] + 1);
    uint64_t newest = 0;
    for (int r : present) newest = std::max(newest, entered[r]);
    const json* rec = nullptr;
    for (int r : present)
      if (by[r].count(stuck)) rec = &by[r][stuck];
    if (stuck > newest && missing.empty()) {
      out += "flight: [" + lane + "] no collective in flight: every rank finished every op it started\n";
    } else {
      std::vector<int> in, never;
      for (int r : present) (entered[r] >= stuck ? in : never).push_back(r);
      out += "flight: [" + lane + "] stuck in " + (rec ? op_text(*rec) : "#" + std::to_string(stuck)) +
             ": entered by " + ranks_text(in) + "; never entered by " + ranks_text(never) +
             (missing.empty() ? "" : "; unknown (no dump): " + ranks_text(missing)) + "\n";
    }
    // The first sequence number at which the ranks that recorded it disagree.
    std::set<uint64_t> seqs;
    for (int r : present)
      for (const auto& [seq, _] : by[r]) seqs.insert(seq);
    for (uint64_t seq : seqs) {
      std::map<std::string, std::vector<int>> kinds;
      for (int r : present)
        if (auto it = by[r].find(seq); it != by[r].end())
          kinds[it->second["op"].get<std::string>() + "(" + it->second["dtype"].get<std::string>() + ", " +
                std::to_string(it->second["numel"].get<int64_t>()) + ")"]
              .push_back(r);
      if (kinds.size() <= 1) continue;
      out += "flight: [" + lane + "] ranks disagree first at #" + std::to_string(seq) + ":";
      for (const auto& [k, rs] : kinds) out += " " + ranks_text(rs) + " called " + k + ";";
      out.back() = '\n';
      break;
    }
    // How long each rank has been stuck when it dumped.
    out += "flight: [" + lane + "] stuck for:";
    for (int r : present) {
      const double at = dumps[r]["dumped_at"].get<double>();
      double since = -1;
      std::string what;
      for (const auto& [seq, x] : by[r]) {  // its oldest unfinished op: later ones wait behind it
        if (x["state"] != "started") continue;
        since = at - x["start_s"].get<double>(), what = "in #" + std::to_string(seq);
        break;
      }
      if (since < 0 && !by[r].empty()) {
        const json& last = by[r].rbegin()->second;
        const double end = last["end_s"].get<double>();
        if (end > 0)
          since = at - end, what = "waiting since #" + std::to_string(last["seq"].get<uint64_t>()) + " ended";
      }
      out += " rank " + std::to_string(r) + " " + (since < 0 ? "?" : seconds(since) + " " + what) + ";";
    }
    out.back() = '\n';
  }
  return out;
}

}  // namespace hpctrain
