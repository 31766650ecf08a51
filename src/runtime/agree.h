// Agreement on errors that come from inputs every rank reads alike (data files, checkpoints,
// files only rank 0 reads). Why: such an error is the same on every rank, so it must be
// reported once (rank 0, "hpctrain: error: ...", exit 2) instead of each rank printing it and
// aborting the job; and a failure on only some ranks must still end the job, never hang it.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>

namespace hpctrain {

// Collective on `comm`: every rank calls it at the same point with its own `body`.
// - No rank throws: returns.
// - Every rank throws (std::exception): every rank throws CollectiveError carrying rank 0's
//   message (rank 0's is the one the guard prints; inputs read alike give the same message).
// - Some ranks throw: those rethrow their own exception (the guard prints it with their rank
//   and aborts the job); the others throw hpctrain::Error naming the ranks that failed.
void agree_on_failure(MPI_Comm comm, const std::function<void()>& body);

// Collective on `comm`: rank 0 alone runs `body` (work on files that ranks would race on, or
// that one reader suffices for); its exception, if any, is thrown on every rank as
// CollectiveError("<context>: <message>"). Other ranks only wait for the outcome.
void run_on_rank0(MPI_Comm comm, const std::string& context, const std::function<void()>& body);

}  // namespace hpctrain
