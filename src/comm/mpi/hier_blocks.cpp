// HierAllreduce's block collectives for ZeRO-1 (reduce_scatter, allgather): only the bytes the
// result needs cross hosts, each block once. See hier_allreduce.h for the contract.
#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/mpi/direct_exchange.h"
#include "comm/mpi/half_sum.h"
#include "comm/mpi/hier_allreduce.h"
#include "runtime/check.h"

namespace hpctrain {
namespace {

using mpi_detail::post;
using mpi_detail::reduce_local;
using mpi_detail::wait_all;

constexpr int kTagScatter = 7301, kTagGather = 7302;

}  // namespace

int HierAllreduce::carrier(int host, int local) const {
  const std::vector<int>& on = layout_.ranks_on[host];
  return on[static_cast<size_t>(local) % on.size()];
}

void HierAllreduce::send_to_owners(const char* data, char* recv, int64_t bytes) {
  const HostLayout& l = layout_;
  const int me = l.ranks_on[l.host_index][l.local_rank];
  std::vector<MPI_Request> reqs;
  char* next = recv;
  for (int g = 0; g < l.hosts; ++g) {
    if (g == l.host_index) continue;
    post(reqs, false, next, bytes, carrier(g, l.local_rank), kTagScatter, world_);
    next += bytes;
  }
  for (int owner = 0; owner < static_cast<int>(l.host_of.size()); ++owner)
    if (l.host_of[owner] != l.host_index && carrier(l.host_index, l.local_of[owner]) == me)
      post(reqs, true, const_cast<char*>(data) + owner * bytes, bytes, owner, kTagScatter, world_);
  wait_all(reqs);
}

bool HierAllreduce::reduce_scatter(void* data, void* out, int64_t block, MPI_Datatype type, MPI_Op op) {
  const size_t elem = reducible(type, op);
  if (elem == 0) return false;
  if (block == 0) return true;
  const HostLayout& l = layout_;
  const int me = l.ranks_on[l.host_index][l.local_rank];
  const int64_t bytes = block * static_cast<int64_t>(elem);
  auto* d = static_cast<char*>(data);
  in_host(data, block * static_cast<int64_t>(l.host_of.size()), type, op);
  recv_.resize(static_cast<size_t>(l.hosts - 1) * bytes);
  send_to_owners(d, recv_.data(), bytes);
  auto* o = static_cast<char*>(out);
  std::memmove(o, d + me * bytes, bytes);
  for (int g = 0; g + 1 < l.hosts; ++g) reduce_local(recv_.data() + g * bytes, o, block, elem, type, op);
  return true;
}

void HierAllreduce::reduce_scatter_half(uint16_t* data, uint16_t* out, int64_t block, c10::ScalarType dtype) {
  if (block == 0) return;
  const HostLayout& l = layout_;
  const int me = l.ranks_on[l.host_index][l.local_rank];
  in_host_half(data, block * static_cast<int64_t>(l.host_of.size()), dtype);  // the host sums, 16 bits
  recv_.resize(static_cast<size_t>(l.hosts - 1) * block * 2);
  send_to_owners(reinterpret_cast<char*>(data), recv_.data(), block * 2);
  stage_.resize(static_cast<size_t>(2 * block));
  float* mine = stage_.data();  // this rank's block: its host's sum, then the others' added in host order
  float* theirs = mine + block;
  widen_half(dtype, data + me * block, mine, block);
  for (int g = 0; g + 1 < l.hosts; ++g) {
    widen_half(dtype, reinterpret_cast<const uint16_t*>(recv_.data()) + g * block, theirs, block);
    for (int64_t i = 0; i < block; ++i) mine[i] += theirs[i];
  }
  narrow_half(dtype, mine, out, block);
}

bool HierAllreduce::allgather(void* data, int64_t block, size_t elem_bytes) {
  const int64_t bytes = block * static_cast<int64_t>(elem_bytes);
  if (bytes % 4 != 0) return false;
  if (bytes == 0) return true;
  const HostLayout& l = layout_;
  const int W = static_cast<int>(l.host_of.size());
  const int me = l.ranks_on[l.host_index][l.local_rank];
  auto* d = static_cast<char*>(data);
  std::vector<char> have(W, 0);
  have[me] = 1;
  std::vector<MPI_Request> reqs;
  for (int owner = 0; owner < W; ++owner)  // the other hosts' blocks this rank carries in
    if (l.host_of[owner] != l.host_index && carrier(l.host_index, l.local_of[owner]) == me) {
      post(reqs, false, d + owner * bytes, bytes, owner, kTagGather, world_);
      have[owner] = 1;
    }
  for (int g = 0; g < l.hosts; ++g)  // this rank's block to one rank of each other host
    if (g != l.host_index) post(reqs, true, d + me * bytes, bytes, carrier(g, l.local_rank), kTagGather, world_);
  wait_all(reqs);
  if (l.local_size == 1) return true;
  for (int r = 0; r < W; ++r)
    if (!have[r]) std::memset(d + r * bytes, 0, bytes);
  in_host(data, W * bytes / 4, MPI_INT32_T, MPI_SUM);  // on the bits: x + 0 == x exactly
  return true;
}

}  // namespace hpctrain
