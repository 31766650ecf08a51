// HierAllreduce: in-host allreduce (shared memory), per-part inter-host allreduce among the
// parts' owners, in-host share of the owners' parts. See the header for the algorithm.
#include "comm/mpi/hier_allreduce.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <exception>
#include <numeric>

#include "comm/mpi/direct_exchange.h"
#include "comm/mpi/half_sum.h"
#include "comm/mpi/shm_allreduce.h"
#include "runtime/check.h"

namespace hpctrain {
namespace {

constexpr int64_t kMaxCount = INT_MAX / 16;  // MPI counts are int: large parts go in pieces
constexpr int kMaxParts = 64;

size_t elem_size(MPI_Datatype type) {
  if (type == MPI_FLOAT || type == MPI_INT32_T) return 4;
  if (type == MPI_DOUBLE || type == MPI_INT64_T) return 8;
  return 0;
}

void mpi_allreduce(void* data, int64_t count, MPI_Datatype type, size_t elem, MPI_Op op, MPI_Comm comm) {
  auto* p = static_cast<char*>(data);
  for (int64_t off = 0; off < count; off += kMaxCount) {
    int n = static_cast<int>(std::min(kMaxCount, count - off));
    HPC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, p + off * elem, n, type, op, comm));
  }
}

}  // namespace

int HostLayout::max_local() const { return *std::max_element(ranks_per_host.begin(), ranks_per_host.end()); }

bool HostLayout::uneven() const {
  return std::any_of(ranks_per_host.begin(), ranks_per_host.end(), [&](int l) { return l != ranks_per_host[0]; });
}

std::string HostLayout::text() const {
  std::string s = std::to_string(hosts) + (hosts == 1 ? " host" : " hosts");
  if (!uneven()) return s + " x " + std::to_string(ranks_per_host[0]) + (ranks_per_host[0] == 1 ? " rank" : " ranks");
  s += " (";
  for (size_t i = 0; i < ranks_per_host.size(); ++i) s += (i ? "+" : "") + std::to_string(ranks_per_host[i]);
  return s + " ranks)";
}

HostLayout HostLayout::of(MPI_Comm comm, MPI_Comm node) {
  HostLayout h;
  int rank = 0, size = 1, leader = 0;
  HPC_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  HPC_MPI_CHECK(MPI_Comm_size(comm, &size));
  HPC_MPI_CHECK(MPI_Comm_rank(node, &h.local_rank));
  HPC_MPI_CHECK(MPI_Comm_size(node, &h.local_size));
  HPC_MPI_CHECK(MPI_Allreduce(&rank, &leader, 1, MPI_INT, MPI_MIN, node));
  int mine[3] = {leader, h.local_size, h.local_rank};
  std::vector<int> all(3 * static_cast<size_t>(size));
  HPC_MPI_CHECK(MPI_Allgather(mine, 3, MPI_INT, all.data(), 3, MPI_INT, comm));
  std::vector<int> host_at(size, -1);  // by leader rank
  for (int r = 0; r < size; ++r)  // a host is listed at its leader (its lowest rank), in rank order
    if (all[3 * r] == r) {
      host_at[r] = static_cast<int>(h.ranks_per_host.size());
      h.ranks_per_host.push_back(all[3 * r + 1]);
    }
  h.hosts = static_cast<int>(h.ranks_per_host.size());
  h.host_index = host_at[leader];
  h.host_of.resize(size);
  h.local_of.resize(size);
  h.ranks_on.resize(h.hosts);
  for (int g = 0; g < h.hosts; ++g) h.ranks_on[g].assign(h.ranks_per_host[g], -1);
  for (int r = 0; r < size; ++r) {
    h.host_of[r] = host_at[all[3 * r]];
    h.local_of[r] = all[3 * r + 2];
    h.ranks_on[h.host_of[r]][h.local_of[r]] = r;
  }
  return h;
}

std::unique_ptr<HierAllreduce> HierAllreduce::create(MPI_Comm comm, MPI_Comm node) {
  std::unique_ptr<HierAllreduce> h(new HierAllreduce());
  h->layout_ = HostLayout::of(comm, node);
  HPC_MPI_CHECK(MPI_Comm_dup(node, &h->node_));
  HPC_MPI_CHECK(MPI_Comm_dup(comm, &h->world_));
  // Parts: every host's ranks share them evenly when the lcm is small; else the largest host's count.
  int64_t lcm = 1;
  for (int l : h->layout_.ranks_per_host) lcm = std::min<int64_t>(std::lcm(lcm, l), kMaxParts + 1);
  h->parts_ = lcm <= kMaxParts ? static_cast<int>(lcm) : h->layout_.max_local();
  const int L = h->layout_.local_size, me = h->layout_.local_rank;
  int rank = 0;
  HPC_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  h->cross_.assign(h->parts_, MPI_COMM_NULL);
  for (int p = 0; p < h->parts_; ++p)  // collective over comm, in the same order everywhere
    HPC_MPI_CHECK(MPI_Comm_split(comm, p % L == me ? 0 : MPI_UNDEFINED, rank, &h->cross_[p]));
  h->shm_ = ShmAllreduce::create(h->node_);  // null for a host of one rank (or when turned off)
  return h;
}

HierAllreduce::~HierAllreduce() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (fin || std::uncaught_exceptions() > 0) return;  // see ShmAllreduce's destructor
  shm_.reset();
  for (auto& c : cross_)
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
  if (world_ != MPI_COMM_NULL) MPI_Comm_free(&world_);
}

std::string HierAllreduce::describe() const {
  return "hierarchical: " + layout_.text() + "; inside a host " +
         (shm_ ? "shared memory (sleeping waits)" : std::string(layout_.local_size > 1 ? "MPI_Allreduce" : "nothing")) +
         ", across hosts " + std::to_string(parts_) + (parts_ == 1 ? " part" : " parts") +
         " each allreduced by one rank per host (rank i of a host of L owns parts i, i+L, ...)";
}

// Part boundaries aligned to 16 elements; the last parts may be short or empty.
int64_t HierAllreduce::part_step(int64_t count) const { return ((count + parts_ - 1) / parts_ + 15) / 16 * 16; }

template <typename F>
void HierAllreduce::for_owned_parts(int64_t count, F&& f) const {
  const int64_t step = part_step(count);
  for (int p = 0; p < parts_; ++p) {
    if (cross_[p] == MPI_COMM_NULL) continue;
    const int64_t lo = std::min(count, p * step), hi = std::min(count, lo + step);
    if (hi > lo) f(lo, hi - lo, cross_[p]);
  }
}

void HierAllreduce::zero_unowned(char* data, int64_t count, size_t elem) const {
  const int64_t step = part_step(count);
  for (int p = 0; p < parts_; ++p) {
    if (cross_[p] != MPI_COMM_NULL) continue;
    const int64_t lo = std::min(count, p * step), hi = std::min(count, lo + step);
    if (hi > lo) std::memset(data + lo * elem, 0, (hi - lo) * elem);
  }
}

void HierAllreduce::in_host(void* data, int64_t count, MPI_Datatype type, MPI_Op op) {
  if (layout_.local_size == 1) return;
  if (shm_ && shm_->allreduce(data, count, type, op)) return;
  mpi_allreduce(data, count, type, elem_size(type), op, node_);
}

size_t HierAllreduce::reducible(MPI_Datatype type, MPI_Op op) {
  return op == MPI_SUM || op == MPI_MAX || op == MPI_MIN ? elem_size(type) : 0;
}

bool HierAllreduce::allreduce(void* data, int64_t count, MPI_Datatype type, MPI_Op op) {
  const size_t elem = reducible(type, op);
  if (elem == 0) return false;
  if (count == 0) return true;
  auto* bytes = static_cast<char*>(data);
  in_host(data, count, type, op);
  for_owned_parts(count, [&](int64_t off, int64_t n, MPI_Comm cross) {
    if (layout_.hosts > 1) mpi_detail::direct_allreduce(bytes + off * elem, n, elem, type, op, cross, recv_);
  });
  if (layout_.hosts > 1 && layout_.local_size > 1) share(data, count, type, op);
  return true;
}

// Step 3, on this host's communicator. One part per local rank (parts_ == local_size: every
// host has that many ranks, or 3+1): an in-place MPI_Allgatherv of the parts (each rank's part
// copied once to each other rank). Otherwise (several parts per rank, e.g. 3+2 ranks: 6 parts):
// non-owned parts zeroed and the in-host sum again (max/min: the in-host op again; the owners'
// values win anyway). The choice depends on this host's layout and `count` only, the same on
// every rank of the host.
void HierAllreduce::share(void* data, int64_t count, MPI_Datatype type, MPI_Op op) {
  const size_t elem = elem_size(type);  // 0 for MPI_UINT16_T, which takes the MPI_Allgatherv only
  const int L = layout_.local_size;
  if (parts_ == L && count <= kMaxCount) {
    const int64_t step = part_step(count);
    std::vector<int> counts(L), displs(L);
    for (int i = 0; i < L; ++i) {
      const int64_t lo = std::min(count, i * step), hi = std::min(count, lo + step);
      counts[i] = static_cast<int>(hi - lo);
      displs[i] = static_cast<int>(lo);
    }
    HPC_MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts.data(), displs.data(), type, node_));
    return;
  }
  if (op == MPI_SUM) zero_unowned(static_cast<char*>(data), count, elem);
  in_host(data, count, type, op);
}

void HierAllreduce::sum_half(uint16_t* data, int64_t count, c10::ScalarType dtype) {
  if (count == 0) return;
  MPI_Op op16 = half_sum_op(dtype);  // throws for other dtypes
  in_host_half(data, count, dtype);
  if (layout_.hosts == 1) return;
  for_owned_parts(count, [&](int64_t off, int64_t n, MPI_Comm cross) {
    mpi_detail::direct_allreduce(reinterpret_cast<char*>(data + off), n, 2, MPI_UINT16_T, op16, cross, recv_);
  });
  if (layout_.local_size == 1) return;  // this rank owns every part
  if (parts_ == layout_.local_size && count <= kMaxCount) {  // the owners' 16-bit parts, copied as they are
    share(data, count, MPI_UINT16_T, MPI_SUM);
    return;
  }
  // Several parts per rank: the others' parts zeroed and summed in (x + 0 rounds to x).
  zero_unowned(reinterpret_cast<char*>(data), count, 2);
  in_host_half(data, count, dtype);
}

// The in-host sum of 16-bit floats in float32, rounded once: shared memory's 16-bit slots, or a
// float32 staging summed with MPI on the host.
void HierAllreduce::in_host_half(uint16_t* data, int64_t count, c10::ScalarType dtype) {
  if (layout_.local_size == 1 || (shm_ && shm_->sum_half(data, count, dtype))) return;
  stage_.resize(static_cast<size_t>(count));
  widen_half(dtype, data, stage_.data(), count);
  in_host(stage_.data(), count, MPI_FLOAT, MPI_SUM);
  narrow_half(dtype, stage_.data(), data, count);
}

}  // namespace hpctrain
