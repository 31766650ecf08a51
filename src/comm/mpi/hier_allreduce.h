// HierAllreduce: an allreduce for worlds that span several hosts with more than one rank on
// some host. It reduces inside each host first, so only host sums cross the network, and every
// rank of a host carries a share of the inter-host traffic (no single leader does it all).
//
// Algorithm (buffer of n elements split into P parts; host h has L_h ranks; part p is owned on
// host h by local rank p mod L_h; P = lcm of the L_h when that is <= 64, else their maximum):
//   1. inside each host: allreduce of the whole buffer (ShmAllreduce's sleeping shared-memory
//      path; MPI_Allreduce on the host's communicator where that path is off);
//   2. across hosts: for each part it owns, a rank allreduces that part with the part's owners
//      on the other hosts (one communicator per part, one rank per host) by direct exchange
//      (comm/mpi/direct_exchange.h: each owner combines one slice of the part from every host
//      and sends it back to all; measured faster than MPI_Allreduce on these pairs);
//   3. inside each host: the owners' parts are shared. With one part per rank (parts == the
//      host's ranks, e.g. 2+2 or 3+1) an in-place MPI_Allgatherv on the host; otherwise (sum)
//      non-owned parts zeroed, then the same in-host sum, which adds only zeros to each value
//      (max/min: the in-host op again).
// On a 1 Gbit/s link with H hosts this sends 2 (H-1)/H x S bytes per host and direction, the
// lower bound of any allreduce that moves host sums (a flat ring with L ranks per host sends
// about L times the share of one rank, e.g. 1.5 S for 2 x 2 ranks).
//
// Contract:
// - create(comm, node) is collective over `comm`; `node` is this rank's host group (the ranks of
//   `comm` sharing its host, from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED); any partition of
//   `comm` into groups is accepted, each group then acting as one host, which lets one machine
//   exercise uneven layouts). The groups must hold ranks of `comm` only.
// - allreduce() is collective over `comm`, called from one thread, in the same order on every
//   rank. Types: MPI_FLOAT, MPI_DOUBLE, MPI_INT32_T, MPI_INT64_T with MPI_SUM, MPI_MAX, MPI_MIN,
//   any count >= 0. Results equal a flat allreduce up to the order of floating-point sums, and
//   every rank gets the same bits (each part's final value is computed by one inter-host
//   allreduce and copied bitwise inside each host).
// - sum_half() does a sum of bfloat16/float16 bit patterns (`dtype`): step 1 in float32, step 3
//   copies the 16-bit results (through float32 where ranks own several parts), step 2 as 16 bits
//   on the wire (comm/mpi/half_sum.h: each inter-host combine computed in
//   float32 and rounded), so the network carries half the bytes of a float32 reduction.
// - reduce_scatter() and allgather() (ZeRO-1's gradients and parameters) work on a buffer of W
//   blocks of `block` elements, block r belonging to rank r of `comm` (W = its size), and move
//   only what the result needs across hosts (comm/mpi/hier_blocks.cpp):
//   reduce_scatter: the in-host sum of the whole buffer, then each block's host sums go straight
//     to its owner, from one rank per other host (on host h the rank whose local index is the
//     owner's local index mod L_h, so a host's ranks share the sending), and the owner adds them
//     in host order. A host sends (W - L_h) x block elements: the bytes of the blocks it does not
//     own, once, (H-1)/H x S for even hosts, half of what an allreduce moves.
//   allgather: each rank sends its block to one rank per other host (chosen as above), then each
//     host shares its ranks' own and received blocks: an in-host sum of zero-padded blocks, done
//     on the bits as integers (x + 0 == x for every bit pattern, -0.0 and NaN included). A host
//     receives the (W - L_h) blocks of the other hosts once.
//   Both are collective over `comm`, called from the same thread as allreduce(); results equal
//   the flat collective's (reduce_scatter: up to the order of floating-point sums).
// - No timeout of its own (the communicator's watchdog guards the comm thread). The destructor
//   frees its communicators unless MPI is finalized or an exception is unwinding (as
//   ShmAllreduce's).
#pragma once

#include <c10/core/ScalarType.h>
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hpctrain {

class ShmAllreduce;

// Which hosts the ranks of `comm` are on, as seen through `node` (collective over `comm`).
struct HostLayout {
  int hosts = 1;
  std::vector<int> ranks_per_host;  // in the order of each host's lowest rank
  int host_index = 0;               // this rank's host, an index into ranks_per_host
  int local_rank = 0, local_size = 1;
  std::vector<int> host_of, local_of;     // per rank of comm: its host, its index on that host
  std::vector<std::vector<int>> ranks_on;  // per host: its ranks of comm, by local index
  int max_local() const;
  bool uneven() const;
  std::string text() const;  // "2 hosts x 2 ranks" or "2 hosts (3+1 ranks)"
  static HostLayout of(MPI_Comm comm, MPI_Comm node);
};

class HierAllreduce {
 public:
  static std::unique_ptr<HierAllreduce> create(MPI_Comm comm, MPI_Comm node);
  ~HierAllreduce();
  HierAllreduce(const HierAllreduce&) = delete;
  HierAllreduce& operator=(const HierAllreduce&) = delete;

  // In place; false (nothing touched) for a type or op it does not take.
  bool allreduce(void* data, int64_t count, MPI_Datatype type, MPI_Op op);
  // In place sum of `count` 16-bit floats of `dtype` (kBFloat16 or kHalf).
  void sum_half(uint16_t* data, int64_t count, c10::ScalarType dtype);

  // Sum/max/min of block `rank` over all ranks into `out` (`block` elements); `data` (W blocks)
  // is left holding this host's sums. false (nothing touched) for a type or op allreduce() declines.
  bool reduce_scatter(void* data, void* out, int64_t block, MPI_Datatype type, MPI_Op op);
  // The same for a sum of 16-bit floats of `dtype`: the in-host sum in float32 rounded once to
  // 16 bits (as allreduce's step 1), host sums cross hosts as 16 bits, the owner adds them in
  // float32 and rounds once.
  void reduce_scatter_half(uint16_t* data, uint16_t* out, int64_t block, c10::ScalarType dtype);
  // In place: block `rank` of `data` is this rank's; on return every block holds its owner's,
  // bitwise. Elements of `elem_bytes`; false (nothing touched) when a block's bytes are not a
  // multiple of 4 (the caller then uses MPI_Allgather).
  bool allgather(void* data, int64_t block, size_t elem_bytes);

  const HostLayout& layout() const { return layout_; }
  int parts() const { return parts_; }
  // One line: the layout, the parts, what carries each step.
  std::string describe() const;

 private:
  HierAllreduce() = default;
  void in_host(void* data, int64_t count, MPI_Datatype type, MPI_Op op);
  void in_host_half(uint16_t* data, int64_t count, c10::ScalarType dtype);  // float32 sums, rounded once
  template <typename F>
  void for_owned_parts(int64_t count, F&& f) const;  // f(offset, length, cross communicator)
  void zero_unowned(char* data, int64_t count, size_t elem) const;
  int64_t part_step(int64_t count) const;
  void share(void* data, int64_t count, MPI_Datatype type, MPI_Op op);  // step 3
  // reduce_scatter's step 2: sends the host sums of the blocks this rank carries to their owners
  // and receives this rank's block from one rank of each other host, into `recv` (hosts - 1
  // blocks of `bytes`, in host order).
  void send_to_owners(const char* data, char* recv, int64_t bytes);
  int carrier(int host, int local) const;
  static size_t reducible(MPI_Datatype type, MPI_Op op);  // element bytes of what allreduce() takes, else 0  // the rank of `host` that carries blocks of local index `local`

  HostLayout layout_;
  MPI_Comm node_ = MPI_COMM_NULL;     // dup of the host group
  MPI_Comm world_ = MPI_COMM_NULL;    // dup of comm (reduce_scatter's and allgather's messages)
  std::vector<MPI_Comm> cross_;       // per part: the owners, one per host (MPI_COMM_NULL if not ours)
  std::unique_ptr<ShmAllreduce> shm_;  // steps 1 and 3 without spinning (null: MPI_Allreduce on node_)
  int parts_ = 1;
  std::vector<float> stage_;  // sum_half's float32 copy
  std::vector<char> recv_;    // what step 2 and reduce_scatter receive from the other hosts
};

}  // namespace hpctrain
