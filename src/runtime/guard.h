// run_guarded: the top-level error policy of every hpctrain program.
//
// Contract:
// - CollectiveError (every rank raised the same one, e.g. a bad flag): rank 0 prints
//   "hpctrain: error: <message>" once on stderr, every rank finalizes MPI and returns 2.
// - Any other exception on any rank: that rank prints "hpctrain: rank R: error: <message>" on
//   stderr and aborts the whole world (MPI_Abort), so no rank is left blocked in a collective.
// - Otherwise returns the body's exit code after finalizing MPI.
#pragma once

#include <functional>

namespace hpctrain {

class World;
int run_guarded(int argc, char** argv, const std::function<int(World&)>& body);

}  // namespace hpctrain
