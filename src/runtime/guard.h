// run_guarded: the top-level error policy of every hpctrain program.
//
// Contract:
// - CollectiveError (every rank raised the same one, e.g. a bad flag): rank 0 prints
//   "hpctrain: error: <message>" once on stderr, every rank finalizes MPI and returns 2 (5 for
//   a DivergedError).
// - Any other exception on any rank: that rank prints "hpctrain: rank R: error: <message>" on
//   stderr and aborts the whole world (MPI_Abort), so no rank is left blocked in a collective.
//   The exit code says what failed (runtime/exit_codes.h): InputError 2,
//   CommError 6, out of memory (std::bad_alloc, c10::OutOfMemoryError) 4, anything else 1.
// - Otherwise returns the body's exit code after finalizing MPI.
// - Fatal-error hooks (add_fatal_error_hook) run on a rank that fails with anything but a
//   CollectiveError (those are inputs every rank rejected alike), before it reports and aborts,
//   with the error's message (the flight recorder dumps there); they must not throw or block.
#pragma once

#include <functional>
#include <string>

namespace hpctrain {

class World;
int run_guarded(int argc, char** argv, const std::function<int(World&)>& body);
void add_fatal_error_hook(std::function<void(const std::string& what)> hook);

}  // namespace hpctrain
