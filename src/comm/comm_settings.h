// CommSettings: how strictly the communicators guard collectives. No MPI, no LibTorch here.
//
// Contract:
// - collective_timeout_s: the deadline of every collective (MPI and NCCL), counted from the
//   moment the operation starts on this rank (MPI: the comm thread, or a caller waiting for it,
//   picks it up; NCCL: it is enqueued on the stream). An overdue collective makes the watchdog
//   print one report and abort the job. <= 0 turns the watchdog off (no thread, no side channel).
// - debug_collectives: before every collective, all ranks compare a fingerprint (op, dtype,
//   element count, sequence number, caller tag) and raise a CollectiveError naming the ranks
//   and both fingerprints on a mismatch. Costs one extra small allgather per collective.
// - from_env() starts from the defaults and applies HPCTRAIN_COLLECTIVE_TIMEOUT (seconds) and
//   HPCTRAIN_DEBUG_COLLECTIVES (1/true/on). A malformed value is a CollectiveError naming the
//   variable (the launcher gives every rank the same environment).
//   `hpctrain train` folds these into its config (train/config.h: flags > TOML > env >
//   defaults) and hands the result to the communicators.
// - allreduce: how the MPI backend reduces across hosts (comm/mpi/hier_allreduce.h).
//   kAuto: hierarchical when the world spans several hosts and some host has more than one
//   rank, else flat. kFlat / kHierarchical force one (for measurement). Every rank must pass the
//   same value (the communicator checks it and throws CollectiveError otherwise).
#pragma once

#include <string>

#include "runtime/exit_codes.h"

namespace hpctrain {

enum class AllreduceAlgo { kAuto, kFlat, kHierarchical };

// "auto", "flat", "hierarchical"; parse_allreduce_algo throws CollectiveError for anything else.
const char* to_string(AllreduceAlgo a);
AllreduceAlgo parse_allreduce_algo(const std::string& s);

struct CommSettings {
  static constexpr double kDefaultTimeoutS = 300;
  double collective_timeout_s = kDefaultTimeoutS;
  bool debug_collectives = false;
  AllreduceAlgo allreduce = AllreduceAlgo::kAuto;

  static CommSettings from_env();
};

// The exit code of a job the watchdog aborted (distinct from errors' 1 and 2).
constexpr int kWatchdogExitCode = kExitHang;  // runtime/exit_codes.h

}  // namespace hpctrain
