// Names inside --snapshot-dir (train/snapshot_session.h): ROOT/hpctrain-<job>-<config>/rank-RRRRR
// (and copy-of-rank-RRRRR, train/snapshot_copy.h), and the one checked read of a snapshot that
// both resume paths use. Private to src/train/snapshot_*.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "ckpt/checkpoint.h"

namespace hpctrain {

inline std::string snapshot_job_dir_name(const std::string& job, const std::string& config) {
  return "hpctrain-" + job + "-" + config;
}

inline std::string snapshot_rank_dir_name(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "rank-%05d", rank);
  return buf;
}

// The snapshot in step directory `path`, verified (every checksum, read_checkpoint) and of this
// job, config and global batch; nullopt (with one note or warning line on stderr naming it and
// `rank`) otherwise. Never throws. snapshot_resume.cpp.
std::optional<CheckpointState> read_snapshot_checked(const std::string& path, const std::string& job,
                                                     const std::string& config, int64_t global_batch, int rank);

}  // namespace hpctrain
