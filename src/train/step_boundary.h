// The step boundary: the ONE agreement every rank makes after each training step.
//
// Why one: every per-step decision that ranks must reach together (stop for preemption, a
// checkpoint write that failed on some rank, a write still in flight) rides in a single small
// allreduce, so a step costs one latency-bound collective for all of them instead of one each,
// and no decision can be taken by some ranks and not others.
//
// Contract:
// - Collective: every rank calls agree_at_boundary once per step, after the step's optimizer
//   update and before anything that depends on the outcome.
// - Every field of BoundaryVotes is an int64 that is SUMMED over ranks: a flag set on any rank
//   gives a total > 0, a count gives the total count. A rank contributes 0 where it has nothing
//   to say (the default).
// - One allreduce of sizeof(BoundaryVotes) / 8 int64 on the run's communicator (tag
//   "step.boundary"), whatever the number of fields; with one rank no collective at all.
//
// Adding a per-step agreement (ZeRO, stragglers, ...): append an int64_t field below with a
// comment saying what a rank puts in and what the total means, fill it where the trainer builds
// its votes (Trainer::State::step_boundary), and read the total there. Keep every field an
// int64_t (the struct is sent as an array of them). A decision that needs a max instead of a
// sum can send one slot per rank, or the value negated and offset; keep it one allreduce.
#pragma once

#include <cstdint>
#include <type_traits>

namespace hpctrain {

class Communicator;

struct BoundaryVotes {
  int64_t preempt = 0;       // 1: this rank received SIGUSR1/SIGTERM. Total > 0: checkpoint and stop.
  int64_t ckpt_error = 0;    // 1: this rank's checkpoint write failed. Total > 0: raise on all ranks.
  int64_t ckpt_pending = 0;  // 1: this rank's checkpoint write is still running. Total: ranks still writing.
  int64_t snapshot_busy = 0;  // 1: this rank's snapshot write or copy is in flight. Total > 0: every rank
                              // skips the next snapshot (train/snapshot_session.h settle).
};
static_assert(std::is_trivially_copyable_v<BoundaryVotes> && sizeof(BoundaryVotes) % sizeof(int64_t) == 0,
              "BoundaryVotes travels as an array of int64: only int64_t fields");

// Collective: the field-wise sum of every rank's `mine` (the step set by set_current_step,
// comm/guard/op_guard.h, is named in the watchdog's report should a rank never arrive).
BoundaryVotes agree_at_boundary(Communicator& comm, const BoundaryVotes& mine);

}  // namespace hpctrain
