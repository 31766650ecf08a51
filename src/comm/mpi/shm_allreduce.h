// ShmAllreduce: an in-place allreduce for ranks that share one node, over an MPI-3 shared-memory
// window (MPI_Win_allocate_shared), whose waits sleep in the kernel (futex) instead of spinning.
//
// Why: MpiCommunicator runs collectives on a comm thread. On a CPU node every rank is bound to
// one core, so that thread shares the core with the rank's compute thread; Open MPI's
// MPI_Allreduce busy-polls while it waits for a slower peer, taking the core from backward.
// Here a rank that waits spins at most ~kSpinMicros, then sleeps on a futex in the shared
// window until the last rank arrives and wakes it (as NCCL's and gloo's waits do).
//
// Contract:
// - create() is collective over `comm`. It returns an instance only when every rank of `comm`
//   is on this node (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) spans all of `comm`), the world
//   has 2 or more ranks, and HPCTRAIN_SHM_ALLREDUCE is not "0" on any rank; otherwise nullptr on
//   every rank (the caller keeps MPI_Allreduce: inter-node communicators and the fallback).
// - allreduce() is collective over the ranks of `comm`, called from one thread at a time, in the
//   same order on every rank. It handles MPI_FLOAT, MPI_DOUBLE, MPI_INT32_T, MPI_INT64_T with
//   MPI_SUM, MPI_MAX, MPI_MIN, any count >= 0 (staged through the window in chunks), and returns
//   false, touching nothing, for any other type or op (the caller then uses MPI_Allreduce; the
//   choice depends only on the arguments, so it is the same on every rank).
// - Every rank receives the same bits: each slice is reduced once, by one rank, in rank order
//   (in[0] op in[1] op ... in[N-1]), and copied to all.
// - No timeout of its own: a peer that never arrives is caught by the communicator's watchdog
//   like a hung MPI_Allreduce (the comm thread sleeps; the watchdog thread aborts the job).
// - The destructor frees the window (collective, like MPI_Win_free) unless MPI is finalized or
//   the destructor runs during stack unwinding (an error on this rank: the peers may never join
//   the free; the process is about to abort, so the window is left to the OS).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>

namespace hpctrain {

class ShmAllreduce {
 public:
  static constexpr int64_t kDefaultChunkBytes = 4 << 20;  // per rank, per round trip
  static constexpr int kSpinMicros = 20;

  static std::unique_ptr<ShmAllreduce> create(MPI_Comm comm, int64_t chunk_bytes = kDefaultChunkBytes);
  ~ShmAllreduce();
  ShmAllreduce(const ShmAllreduce&) = delete;
  ShmAllreduce& operator=(const ShmAllreduce&) = delete;

  bool allreduce(void* data, int64_t count, MPI_Datatype type, MPI_Op op);

  int size() const { return size_; }
  // Futex sleeps so far (for tests and profiles: waits that did not spin to completion).
  uint64_t sleeps() const { return sleeps_; }

 private:
  struct Header;
  ShmAllreduce() = default;
  void barrier();
  template <typename T>
  bool run(T* data, int64_t count, MPI_Op op);

  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Win win_ = MPI_WIN_NULL;
  Header* hdr_ = nullptr;
  char* slots_ = nullptr;   // size_ input slots of chunk_ bytes each
  char* result_ = nullptr;  // one slot: the reduced chunk
  int64_t chunk_ = 0;
  int rank_ = 0, size_ = 1;
  uint64_t sleeps_ = 0;
};

}  // namespace hpctrain
