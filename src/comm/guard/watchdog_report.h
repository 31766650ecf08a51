// What the watchdog learns about each rank over its side channel, and the one-line report it
// prints when a collective is overdue. Pure data and formatting (no MPI calls): unit-testable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comm/guard/desync.h"
#include "comm/op_info.h"

namespace hpctrain {

// One communication lane's progress (the MPI comm thread, or the NCCL stream). Fixed-size and
// trivially copyable: it travels as bytes.
struct LaneStatus {
  uint64_t started = 0;   // highest sequence number started on this lane (0: none yet)
  uint64_t finished = 0;  // highest sequence number finished
  int64_t step = -1;      // the trainer's step when op #started began (-1: never set)
  Fingerprint last;       // op #started
};

constexpr int kMaxLanes = 2;

// A rank's answer to a status request.
struct PeerStatus {
  int32_t rank = -1;
  int32_t lanes = 0;
  LaneStatus lane[kMaxLanes];
};

// The overdue collective on the reporting rank.
struct OverdueOp {
  int lane = 0;           // index into PeerStatus::lane
  std::string lane_name;  // "mpi", "nccl"
  OpInfo info;
  int64_t step = -1;
  double deadline_s = 0;  // the timeout it missed
};

// "rank 1: collective allreduce(float32, 1024) #57 from ddp.bucket[3] at step 120 timed out
// after 5 s; ranks that reached it: 0,1; ranks that did not: 2 (last op barrier(none, 0) #56,
// finished)". by_rank[r] is nullopt when rank r did not answer (dead, or hung so badly that
// its watchdog thread cannot run); those are named as such.
std::string format_timeout_report(int rank, const OverdueOp& op, const std::vector<std::optional<PeerStatus>>& by_rank);

}  // namespace hpctrain
