// ShmAllreduce: an in-place allreduce for ranks that share one node, over an MPI-3 shared-memory
// window (MPI_Win_allocate_shared), whose waits sleep in the kernel (futex) instead of spinning.
//
// Why: MpiCommunicator runs collectives on a comm thread. On a CPU node every rank is bound to
// one core, so that thread shares the core with the rank's compute thread; Open MPI's
// MPI_Allreduce busy-polls while it waits for a slower peer, taking the core from backward.
// Here a rank that waits spins at most ~kSpinMicros (yielding the core after 2 us when the node
// has more ranks than CPUs), then sleeps on a futex in the shared window until the rank it waits
// for moves on and wakes it (as NCCL's and gloo's waits do).
//
// Design (perf/README.md, "In-host allreduce (microbenchmark)", has the measurements): the
// buffer goes through the window in chunks of chunk_bytes (default 256 KiB), pipelined through
// kSlots slots per rank (a 4 MiB ring per rank: smaller rings measured slower, since the lines a
// rank rewrites are then still in its peers' caches). Each chunk is split into one 16-element
// aligned slice per rank. Step i of a call, on every rank r:
//   1. copy in chunk i: r's data, less r's own slice, into r's slot (the slot's previous chunk
//      done everywhere first; with 16 slots that almost never waits);
//   2. reduce chunk i-1 (once every rank has copied it in): r's slice, read from r's own buffer
//      and the others' slots, in rank order, into r's buffer and r's slot;
//   3. copy out chunk i-2 (once every rank has reduced it): the others' slices from their slots.
// So a rank copies (N-1)/N of the buffer in and out, never its own slice. Each rank announces
// each stage of each chunk in its own progress counter (one writer per cache line; a waiter
// waits for exactly the counters it needs, no central barrier); the window's writes are
// prefetched for ownership 4 KiB ahead. The window holds N x 4 MiB. Against a spin-only wait
// the sleep cost 4-7% of the median at 512 KiB - 1 MiB and within 2% below; this path beat
// MPI_Allreduce from 64 KiB up (2-vCPU VM), so no size is handed to MPI.
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

#include <c10/core/ScalarType.h>
#include <mpi.h>

#include <cstdint>
#include <memory>

namespace hpctrain {

class ShmAllreduce {
 public:
  static constexpr int64_t kDefaultChunkBytes = 256 << 10;  // one pipeline stage, per rank
  static constexpr int kSlots = 16;                         // chunk slots per rank (ring)
  static constexpr int kSpinMicros = 20;
  static constexpr int kMaxRanks16 = 256;  // sum_half's ranks per host

  static std::unique_ptr<ShmAllreduce> create(MPI_Comm comm, int64_t chunk_bytes = kDefaultChunkBytes);
  ~ShmAllreduce();
  ShmAllreduce(const ShmAllreduce&) = delete;
  ShmAllreduce& operator=(const ShmAllreduce&) = delete;

  bool allreduce(void* data, int64_t count, MPI_Datatype type, MPI_Op op);
  // In place sum of `count` bfloat16/float16 bit patterns (`dtype`): each value the float32 sum
  // of the ranks' values in rank order, rounded once (the bits a float32 staging would give,
  // with half the bytes through the window). false (nothing touched) for another dtype or more
  // than kMaxRanks16 ranks on the host.
  bool sum_half(uint16_t* data, int64_t count, c10::ScalarType dtype);

  int size() const { return size_; }
  // Futex sleeps so far (for tests and profiles: waits that did not spin to completion).
  uint64_t sleeps() const { return sleeps_; }

 private:
  struct Header;
  ShmAllreduce() = default;
  void publish(int stage, uint32_t seq);
  void wait(int stage, uint32_t target);
  template <typename T>
  bool run(T* data, int64_t count, MPI_Op op);

  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Win win_ = MPI_WIN_NULL;
  Header* hdr_ = nullptr;  // one per rank: its progress counters
  char* slots_ = nullptr;  // kSlots slots of chunk_ bytes per rank, rank-major
  int64_t chunk_ = 0;
  uint64_t seq_ = 0;  // chunks reduced since create(), the same on every rank
  int rank_ = 0, size_ = 1;
  bool yield_ = false;  // more ranks than CPUs: the spin yields the core
  uint64_t sleeps_ = 0;
};

}  // namespace hpctrain
