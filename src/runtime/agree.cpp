// agree_on_failure and run_on_rank0 over plain MPI: an allgather of failure flags before any
// rank throws, and a broadcast of rank 0's message (its error_line: length first, then the
// bytes).
#include "runtime/agree.h"

#include <exception>
#include <string>
#include <vector>

#include "runtime/check.h"
#include "runtime/error_line.h"

namespace hpctrain {
namespace {

// Broadcasts `msg` from rank 0 (length first, then the bytes).
std::string bcast_from_rank0(MPI_Comm comm, std::string msg) {
  int len = static_cast<int>(msg.size());
  HPC_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, 0, comm));
  msg.resize(static_cast<size_t>(len));
  if (len > 0) HPC_MPI_CHECK(MPI_Bcast(msg.data(), len, MPI_CHAR, 0, comm));
  return msg;
}

}  // namespace

void agree_on_failure(MPI_Comm comm, const std::function<void()>& body) {
  std::exception_ptr err;
  std::string msg;
  try {
    body();
  } catch (const std::exception& e) {
    err = std::current_exception();
    msg = error_line(e);  // one line: a LibTorch error's backtrace stays out of the broadcast
  }
  int size = 1;
  HPC_MPI_CHECK(MPI_Comm_size(comm, &size));
  // Every rank learns who failed before anyone throws, so nobody is left in this exchange.
  int failed = err ? 1 : 0;
  std::vector<int> flags(static_cast<size_t>(size));
  HPC_MPI_CHECK(MPI_Allgather(&failed, 1, MPI_INT, flags.data(), 1, MPI_INT, comm));
  std::string who;
  int failures = 0;
  for (int r = 0; r < size; ++r)
    if (flags[static_cast<size_t>(r)]) who += (failures++ ? "," : "") + std::to_string(r);
  if (failures == 0) return;
  if (failures == size) throw CollectiveError(bcast_from_rank0(comm, msg));
  if (err) std::rethrow_exception(err);
  throw Error("rank(s) " + who + " failed where this rank succeeded (see their error)");
}

void run_on_rank0(MPI_Comm comm, const std::string& context, const std::function<void()>& body) {
  int rank = 0;
  HPC_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  std::string msg;
  if (rank == 0) {
    try {
      body();
    } catch (const std::exception& e) {
      msg = error_line(e);  // one line, never empty
    }
  }
  msg = bcast_from_rank0(comm, msg);
  if (!msg.empty()) throw CollectiveError(context.empty() ? msg : context + ": " + msg);
}

}  // namespace hpctrain
