// Direct point-to-point exchanges for the hierarchical collectives (see direct_exchange.h).
#include "comm/mpi/direct_exchange.h"

#include <algorithm>
#include <climits>

#include "runtime/check.h"

namespace hpctrain::mpi_detail {
namespace {

constexpr int64_t kMaxBytes = int64_t{1} << 30;  // one message
constexpr int kTagScatter = 7311, kTagGather = 7312;

}  // namespace

void post(std::vector<MPI_Request>& reqs, bool send, char* p, int64_t bytes, int peer, int tag, MPI_Comm comm) {
  for (int64_t off = 0; off < bytes; off += kMaxBytes) {
    const int n = static_cast<int>(std::min(kMaxBytes, bytes - off));
    reqs.emplace_back();
    if (send)
      HPC_MPI_CHECK(MPI_Isend(p + off, n, MPI_BYTE, peer, tag, comm, &reqs.back()));
    else
      HPC_MPI_CHECK(MPI_Irecv(p + off, n, MPI_BYTE, peer, tag, comm, &reqs.back()));
  }
}

void wait_all(std::vector<MPI_Request>& reqs) {
  if (!reqs.empty()) HPC_MPI_CHECK(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE));
  reqs.clear();
}

void reduce_local(const char* in, char* inout, int64_t count, size_t elem, MPI_Datatype type, MPI_Op op) {
  constexpr int64_t kPiece = INT_MAX / 16;
  for (int64_t off = 0; off < count; off += kPiece)
    HPC_MPI_CHECK(MPI_Reduce_local(in + off * elem, inout + off * elem, static_cast<int>(std::min(kPiece, count - off)),
                                   type, op));
}

void direct_allreduce(char* data, int64_t count, size_t elem, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                      std::vector<char>& scratch) {
  int P = 1, me = 0;
  HPC_MPI_CHECK(MPI_Comm_size(comm, &P));
  HPC_MPI_CHECK(MPI_Comm_rank(comm, &me));
  if (P == 1 || count == 0) return;
  const int64_t step = ((count + P - 1) / P + 15) / 16 * 16;
  auto lo = [&](int r) { return std::min(count, r * step); };
  auto len = [&](int r) { return std::min(count, lo(r) + step) - lo(r); };
  const int64_t mine = len(me) * static_cast<int64_t>(elem);
  scratch.resize(static_cast<size_t>(P) * mine);
  std::vector<MPI_Request> reqs;
  for (int r = 0; r < P; ++r)  // reduce-scatter: every copy of my slice to me
    if (r != me && len(r) + mine > 0) {
      if (mine > 0) post(reqs, false, scratch.data() + r * mine, mine, r, kTagScatter, comm);
      if (len(r) > 0) post(reqs, true, data + lo(r) * elem, len(r) * elem, r, kTagScatter, comm);
    }
  wait_all(reqs);
  if (mine > 0) {  // in rank order: s = d_0 op d_1 op ... op d_{P-1}, built from the last
    char* own = data + lo(me) * elem;
    if (me + 1 < P) {
      char* acc = scratch.data() + (P - 1) * mine;
      for (int r = P - 2; r > me; --r) reduce_local(scratch.data() + r * mine, acc, len(me), elem, type, op);
      reduce_local(own, acc, len(me), elem, type, op);  // acc = d_me op (d_me+1 op ...)
      std::copy(acc, acc + mine, own);
    }
    for (int r = me - 1; r >= 0; --r) reduce_local(scratch.data() + r * mine, own, len(me), elem, type, op);
  }
  for (int r = 0; r < P; ++r)  // allgather: my reduced slice to all, theirs from them
    if (r != me) {
      if (mine > 0) post(reqs, true, data + lo(me) * elem, mine, r, kTagGather, comm);
      if (len(r) > 0) post(reqs, false, data + lo(r) * elem, len(r) * elem, r, kTagGather, comm);
    }
  wait_all(reqs);
}

}  // namespace hpctrain::mpi_detail
