// Point-to-point building blocks of the hierarchical collectives (private to comm/mpi/): every
// rank exchanges with every other directly, with non-blocking sends and receives, so the
// exchanges of a call overlap on the network and each byte crosses it once.
//
// Contract:
// - post() starts a send or receive of `bytes` to/from `peer` on `comm` as messages of at most
//   1 GiB (MPI counts are int; one tag, so MPI keeps their order); wait_all() completes them.
// - reduce_local() is inout = in op inout over `count` elements (MPI_Reduce_local in pieces;
//   any MPI type and op, user operators included).
// - direct_allreduce() is an in-place allreduce of `count` elements over all ranks of `comm`:
//   the buffer is cut into one 16-element-aligned slice per rank; each rank receives every
//   other rank's copy of its slice, combines them in rank order, and sends the result back to
//   all (a reduce-scatter and an allgather by direct exchange). Each rank sends and receives
//   2 (P-1)/P of the buffer, as a ring, in two steps instead of 2 (P-1); every rank gets the
//   same bits (each slice is combined by one rank). Collective over `comm`; `scratch` is reused.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

namespace hpctrain::mpi_detail {

void post(std::vector<MPI_Request>& reqs, bool send, char* p, int64_t bytes, int peer, int tag, MPI_Comm comm);
void wait_all(std::vector<MPI_Request>& reqs);
void reduce_local(const char* in, char* inout, int64_t count, size_t elem, MPI_Datatype type, MPI_Op op);
void direct_allreduce(char* data, int64_t count, size_t elem, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                      std::vector<char>& scratch);

}  // namespace hpctrain::mpi_detail
