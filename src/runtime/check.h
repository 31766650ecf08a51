// Error checking for MPI calls and user-facing errors.
// Contract: every MPI call in hpctrain goes through HPC_MPI_CHECK, which throws
// hpctrain::Error naming the call, file:line and the calling rank. No LibTorch here.
#pragma once

#include <mpi.h>

#include <stdexcept>
#include <string>

namespace hpctrain {

// An error meant for the user: its what() is one line that names the cause.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An error every rank raises identically (bad flag, bad config): the CLI reports it once
// from rank 0 and exits cleanly on all ranks instead of aborting the world.
class CollectiveError : public Error {
 public:
  using Error::Error;
};

// Bad input found by one rank after start-up (a token id outside the vocabulary in a window read
// mid-run): the rank reports it and ends the job with exit code 2 (kExitBadInput), like a bad
// input found at start-up, so that no launcher restarts it.
class InputError : public Error {
 public:
  using Error::Error;
};

// Training diverged: a non-finite loss or gradient norm (exit code 5, kExitDiverged; never restarted).
class DivergedError : public Error {
 public:
  using Error::Error;
};

// MPI or NCCL reported a failed call (a peer or a link went away): exit code 6 (kExitCommFailed),
// which the launchers restart. HPC_MPI_CHECK throws it.
class CommError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);

}  // namespace hpctrain

#define HPC_MPI_CHECK(call)                                                                              \
  do {                                                                                                   \
    int hpc_mpi_rc_ = (call);                                                                            \
    if (hpc_mpi_rc_ != MPI_SUCCESS) ::hpctrain::throw_mpi_error(hpc_mpi_rc_, #call, __FILE__, __LINE__); \
  } while (0)
