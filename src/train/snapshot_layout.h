// Names inside --snapshot-dir (train/snapshot_session.h): ROOT/hpctrain-<job>-<config>/rank-RRRRR.
#pragma once

#include <cstdio>
#include <string>

namespace hpctrain {

inline std::string snapshot_job_dir_name(const std::string& job, const std::string& config) {
  return "hpctrain-" + job + "-" + config;
}

inline std::string snapshot_rank_dir_name(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "rank-%05d", rank);
  return buf;
}

}  // namespace hpctrain
