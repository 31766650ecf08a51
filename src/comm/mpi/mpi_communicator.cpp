// MpiCommunicator: every op is a closure run on the CommThread, through its OpGuard
// (comm/guard/op_guard.h). Large buffers go in chunks (MPI counts are int). Reductions and the float/int
// allgather_into take one of three paths, chosen once at construction from the rank layout:
// hierarchical (several hosts, some with several ranks: HierAllreduce), ShmAllreduce's sleeping
// path (every rank on one host), or flat MPI. Half types cross hosts as 16 bits (half_sum.h).
#include "comm/mpi/mpi_communicator.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <vector>

#include "comm/mpi/comm_thread.h"
#include "comm/mpi/half_sum.h"
#include "comm/mpi/hier_allreduce.h"
#include "comm/mpi/reduce_paths.h"
#include "comm/mpi/shm_allreduce.h"
#include "comm/guard/op_guard.h"
#include "comm/guard/watchdog.h"
#include "runtime/check.h"

namespace hpctrain {
namespace {

using namespace mpi_detail;  // mpi_type, mpi_op, is_half, kChunk, Paths, reduce_tensor

void check_reducible(at::ScalarType s, ReduceOp op, const char* what) {
  bool ok = s == at::kFloat || s == at::kDouble || is_half(s) || s == at::kInt || s == at::kLong;
  if (!ok) throw Error(std::string(what) + ": dtype " + c10::toString(s) + " cannot be reduced");
  if (op == ReduceOp::kAvg && !at::isFloatingType(s))
    throw Error(std::string(what) + ": avg needs a floating dtype, got " + c10::toString(s));
}

// An MPI datatype of one element of `elem` bytes, for pure data movement.
MPI_Datatype element_type(size_t elem) {
  switch (elem) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    case 8: return MPI_UINT64_T;
    default: throw Error("allgather_into: unsupported element size " + std::to_string(elem));
  }
}

int block_count(int64_t n, const char* what) {
  if (n > INT_MAX)
    throw Error(std::string(what) + ": a block of " + std::to_string(n) +
                " elements exceeds MPI's int count; use smaller buckets");
  return static_cast<int>(n);
}

}  // namespace

struct MpiCommunicator::Impl {
  explicit Impl(std::unique_ptr<OpGuard> g) : guard(std::move(g)), thread(guard.get()) {}
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  std::unique_ptr<ShmAllreduce> shm;    // all ranks on one node: allreduce without spinning
  std::unique_ptr<HierAllreduce> hier;  // several hosts, some with several ranks
  bool multi_node = false;
  std::string algorithm;  // what describe_algorithms() reports
  Paths paths() const { return Paths{comm, shm.get(), hier.get(), multi_node}; }
  std::unique_ptr<OpGuard> guard;  // watchdog lane "mpi", flight lane "cpu", desync, metering
  CommThread thread;               // declared last among users of `comm`; destroyed first (drains the queue)
};

MpiCommunicator::MpiCommunicator(MPI_Comm parent, CommSettings settings, std::shared_ptr<Watchdog> watchdog) {
  if (!watchdog && settings.collective_timeout_s > 0)
    watchdog = std::make_shared<Watchdog>(parent, settings.collective_timeout_s);
  impl_ = std::make_unique<Impl>(
      std::make_unique<OpGuard>(parent, settings, std::move(watchdog), "cpu", "mpi", OpGuard::Lane::kSync));
  HPC_MPI_CHECK(MPI_Comm_dup(parent, &impl_->comm));
  HPC_MPI_CHECK(MPI_Comm_rank(impl_->comm, &impl_->rank));
  HPC_MPI_CHECK(MPI_Comm_size(impl_->comm, &impl_->size));
  choose_paths(settings.allreduce);
}

MpiCommunicator::~MpiCommunicator() {
  MPI_Comm comm = impl_->comm;
  impl_.reset();  // joins the comm thread after draining it, then releases the guard and watchdog
  int fin = 0;
  MPI_Finalized(&fin);
  if (fin) return;
  MPI_Comm_free(&comm);
}

// Collective: the layout decides (kAuto), or the setting forces a path; every rank must ask the same.
void MpiCommunicator::choose_paths(AllreduceAlgo asked) {
  MPI_Comm comm = impl_->comm, node = MPI_COMM_NULL;
  int mine = static_cast<int>(asked), lo = 0, hi = 0;
  HPC_MPI_CHECK(MPI_Allreduce(&mine, &lo, 1, MPI_INT, MPI_MIN, comm));
  HPC_MPI_CHECK(MPI_Allreduce(&mine, &hi, 1, MPI_INT, MPI_MAX, comm));
  if (lo != hi)
    throw CollectiveError("ranks ask for different allreduce algorithms (" + std::string(to_string(AllreduceAlgo(lo))) +
                          " and " + to_string(AllreduceAlgo(hi)) + "); give every rank the same --allreduce");
  HPC_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, impl_->rank, MPI_INFO_NULL, &node));
  HostLayout layout = HostLayout::of(comm, node);
  impl_->multi_node = layout.hosts > 1;
  const bool several_per_host = layout.max_local() > 1;
  const bool hier = impl_->size > 1 && (asked == AllreduceAlgo::kHierarchical ||
                                        (asked == AllreduceAlgo::kAuto && impl_->multi_node && several_per_host));
  std::string why = asked != AllreduceAlgo::kAuto ? std::string("asked for (--allreduce ") + to_string(asked) + ")"
                    : impl_->size == 1          ? "a world of one"
                    : !impl_->multi_node        ? "every rank on one host"
                    : !several_per_host         ? "one rank per host: nothing to reduce inside a host"
                                                : "several hosts with several ranks on some";
  if (hier) {
    impl_->hier = HierAllreduce::create(comm, node);
    impl_->algorithm = impl_->hier->describe() + " [" + why + "]";
  } else {
    impl_->shm = ShmAllreduce::create(comm);
    impl_->algorithm = std::string("flat: ") + layout.text() + "; " +
                       (impl_->shm ? "shared memory (sleeping waits)" : "MPI_Allreduce over all ranks") + " [" + why +
                       "]";
  }
  HPC_MPI_CHECK(MPI_Comm_free(&node));
}

std::vector<std::string> MpiCommunicator::describe_algorithms() const {
  const Impl& i = *impl_;
  const char* half =
      i.paths().half_on_wire() ? "bfloat16/float16 sums cross hosts as 16 bits (each combine in float32)"
                               : "bfloat16/float16 reduced in float32, rounded once";
  return {
      "allreduce: " + i.algorithm,
      std::string("reduce_scatter: ") +
          (i.hier ? "hierarchical: the in-host sum, then each block's host sums sent once to its owner "
                    "((H-1)/H of the bytes per host)"
                  : i.shm ? "the allreduce above, then this rank's block" : "MPI_Reduce_scatter_block"),
      std::string("allgather_into: ") +
          (i.hier ? "hierarchical: each block sent once to each other host, then shared inside the host "
                    "(blocks of a multiple of 4 bytes; else MPI_Allgather)"
                  : i.shm ? "float/int: a sum of zero-padded blocks over the allreduce above; other types MPI_Allgather"
                          : "MPI_Allgather"),
      "broadcast, allgather, barrier: MPI (MPI_Bcast, MPI_Allgatherv, MPI_Barrier)",
      std::string("half types: ") + half,
  };
}

Watchdog* MpiCommunicator::watchdog() const { return impl_->guard->watchdog(); }

int MpiCommunicator::rank() const { return impl_->rank; }
int MpiCommunicator::size() const { return impl_->size; }
MPI_Comm MpiCommunicator::raw() const { return impl_->comm; }

WorkHandle MpiCommunicator::allreduce(at::Tensor t, ReduceOp op, std::string tag) {
  check_carriable(*this, t, "allreduce");
  check_reducible(t.scalar_type(), op, "allreduce");
  Paths p = impl_->paths();
  int world = impl_->size;
  return impl_->thread.submit(make_op_info("allreduce", t, t.numel(), std::move(tag)),
                              [t, op, world, p]() mutable { reduce_tensor(t, op, world, p); });
}

WorkHandle MpiCommunicator::allreduce(std::vector<at::Tensor> ts, ReduceOp op, std::string tag) {
  if (ts.empty()) return allreduce(at::empty({0}), op, std::move(tag));
  for (auto& t : ts) {
    check_carriable(*this, t, "allreduce");
    if (t.scalar_type() != ts[0].scalar_type())
      throw Error("allreduce of a tensor list: dtypes differ (" + std::string(c10::toString(ts[0].scalar_type())) +
                  " and " + c10::toString(t.scalar_type()) + ")");
  }
  check_reducible(ts[0].scalar_type(), op, "allreduce");
  int64_t total = 0;
  for (auto& t : ts) total += t.numel();
  OpInfo info = make_op_info("allreduce", ts[0], total, std::move(tag));
  Paths p = impl_->paths();
  int world = impl_->size;
  return impl_->thread.submit(std::move(info), [ts, op, world, p]() mutable {
    std::vector<at::Tensor> flat;
    flat.reserve(ts.size());
    for (auto& t : ts) flat.push_back(t.reshape({-1}));
    at::Tensor buf = at::cat(flat);
    reduce_tensor(buf, op, world, p);
    int64_t off = 0;
    for (auto& t : ts) {
      t.view({-1}).copy_(buf.narrow(0, off, t.numel()));
      off += t.numel();
    }
  });
}

WorkHandle MpiCommunicator::broadcast(at::Tensor t, int root, std::string tag) {
  check_carriable(*this, t, "broadcast");
  if (root < 0 || root >= impl_->size)
    throw Error("broadcast: root " + std::to_string(root) + " outside world of " + std::to_string(impl_->size));
  MPI_Comm comm = impl_->comm;
  return impl_->thread.submit(make_op_info("broadcast", t, t.numel(), std::move(tag)), [t, root, comm]() {
    auto* p = static_cast<char*>(t.data_ptr());
    int64_t bytes = t.nbytes();
    for (int64_t off = 0; off < bytes; off += kChunk)
      HPC_MPI_CHECK(MPI_Bcast(p + off, static_cast<int>(std::min(kChunk, bytes - off)), MPI_BYTE, root, comm));
  });
}

WorkHandle MpiCommunicator::allgather(at::Tensor t, std::vector<at::Tensor>* out, std::string tag) {
  check_carriable(*this, t, "allgather");
  if (t.dim() == 0) t = t.reshape({1});
  MPI_Comm comm = impl_->comm;
  int world = impl_->size;
  return impl_->thread.submit(make_op_info("allgather", t, t.numel(), std::move(tag)), [t, out, world, comm]() {
    // Exchange (rows, row elements) so ranks can check agreement and size the receive.
    int64_t row = t.size(0) == 0 ? -1 : t.numel() / t.size(0);
    std::vector<int64_t> mine = {t.size(0), row}, all(2 * world);
    HPC_MPI_CHECK(MPI_Allgather(mine.data(), 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, comm));
    int64_t local_row = 1;
    for (int64_t d = 1; d < t.dim(); ++d) local_row *= t.size(d);
    std::vector<int> counts(world), displs(world);
    int64_t total = 0;
    for (int r = 0; r < world; ++r) {
      int64_t rows = all[2 * r], r_row = all[2 * r + 1];
      if (r_row >= 0 && r_row != local_row)
        throw Error("allgather: rank " + std::to_string(r) + " contributes rows of " + std::to_string(r_row) +
                    " elements, this rank rows of " + std::to_string(local_row));
      int64_t bytes = rows * local_row * static_cast<int64_t>(t.element_size());
      if (total + bytes > INT_MAX) throw Error("allgather: more than 2 GiB in total");
      counts[r] = static_cast<int>(bytes);
      displs[r] = static_cast<int>(total);
      total += bytes;
    }
    std::vector<int64_t> shape = t.sizes().vec();
    int64_t all_rows = 0;
    for (int r = 0; r < world; ++r) all_rows += all[2 * r];
    shape[0] = all_rows;
    at::Tensor recv = at::empty(shape, t.options());
    HPC_MPI_CHECK(MPI_Allgatherv(t.data_ptr(), static_cast<int>(t.nbytes()), MPI_BYTE, recv.data_ptr(), counts.data(),
                                 displs.data(), MPI_BYTE, comm));
    out->clear();
    int64_t row0 = 0;
    for (int r = 0; r < world; ++r) {
      out->push_back(recv.narrow(0, row0, all[2 * r]));
      row0 += all[2 * r];
    }
  });
}

WorkHandle MpiCommunicator::reduce_scatter(at::Tensor input, at::Tensor output, ReduceOp op, std::string tag) {
  check_flat_collective(*this, output, input, "reduce_scatter");
  check_reducible(input.scalar_type(), op, "reduce_scatter");
  int n = block_count(output.numel(), "reduce_scatter");
  Paths p = impl_->paths();
  int world = impl_->size, rank = impl_->rank;
  return impl_->thread.submit(make_op_info("reduce_scatter", input, input.numel(), std::move(tag)),
                              [input, output, op, n, world, rank, p]() mutable {
                                if (n == 0) return;
                                MPI_Comm comm = p.comm;
                                if (p.hier && reduce_scatter_hier(input, output, op, world, p)) return;
                                if (p.shm || p.hier) {  // the allreduce's path, then this rank's block
                                  at::Tensor flat = input.view({-1});
                                  reduce_tensor(flat, op, world, p);
                                  output.view({-1}).copy_(flat.narrow(0, static_cast<int64_t>(rank) * n, n));
                                  return;
                                }
                                bool half = is_half(input.scalar_type());
                                if (half && op != ReduceOp::kMax && op != ReduceOp::kMin && p.half_on_wire()) {
                                  HPC_MPI_CHECK(MPI_Reduce_scatter_block(input.data_ptr(), output.data_ptr(), n,
                                                                         MPI_UINT16_T,
                                                                         half_sum_op(input.scalar_type()), comm));
                                  if (op == ReduceOp::kAvg) output.copy_(output.to(at::kFloat).div_(world));
                                  return;
                                }
                                at::Tensor in = half ? input.to(at::kFloat) : input;
                                at::Tensor out = half ? at::empty({n}, in.options()) : output;
                                HPC_MPI_CHECK(MPI_Reduce_scatter_block(in.data_ptr(), out.data_ptr(), n,
                                                                       mpi_type(in.scalar_type()), mpi_op(op), comm));
                                if (op == ReduceOp::kAvg) out.div_(world);
                                if (!out.is_same(output)) output.view({-1}).copy_(out.view({-1}));
                              });
}

WorkHandle MpiCommunicator::allgather_into(at::Tensor input, at::Tensor output, std::string tag) {
  check_flat_collective(*this, input, output, "allgather_into");
  int n = block_count(input.numel(), "allgather_into");
  MPI_Datatype type = element_type(input.element_size());
  bool in_place = is_own_block(input, output, impl_->rank);
  int world = impl_->size, rank = impl_->rank;
  // A type the allreduce's path sums exactly, on the shared-memory or hierarchical path: the other
  // blocks are zeroed and summed in (x + 0 == x), so the waits sleep like the allreduce's.
  at::ScalarType st = input.scalar_type();
  Paths p = impl_->paths();
  const bool by_sum = (st == at::kFloat || st == at::kDouble || st == at::kInt || st == at::kLong) && p.shm;
  return impl_->thread.submit(make_op_info("allgather_into", input, output.numel(), std::move(tag)),
                              [input, output, n, type, in_place, world, rank, p, by_sum]() mutable {
                                if (n == 0) return;
                                MPI_Comm comm = p.comm;
                                if (p.hier) {  // across hosts each block once, then shared in each host
                                  if (!in_place)
                                    output.view({-1}).narrow(0, static_cast<int64_t>(rank) * n, n).copy_(input.view({-1}));
                                  if (p.hier->allgather(output.data_ptr(), n, output.element_size())) return;
                                  in_place = true;  // MPI_Allgather below, from the block just placed
                                }
                                if (by_sum) {
                                  at::Tensor flat = output.view({-1});
                                  int64_t off = static_cast<int64_t>(rank) * n;
                                  if (!in_place) flat.narrow(0, off, n).copy_(input.view({-1}));
                                  if (off > 0) flat.narrow(0, 0, off).zero_();
                                  if (off + n < flat.numel()) flat.narrow(0, off + n, flat.numel() - off - n).zero_();
                                  reduce_tensor(flat, ReduceOp::kSum, world, p);
                                  return;
                                }
                                HPC_MPI_CHECK(MPI_Allgather(in_place ? MPI_IN_PLACE : input.data_ptr(), n, type,
                                                            output.data_ptr(), n, type, comm));
                              });
}

WorkHandle MpiCommunicator::probe_link(int to, int from, int64_t bytes, int rounds, double* seconds, std::string tag) {
  const int n = impl_->size;
  auto peer_ok = [n](int p) { return p >= -1 && p < n; };
  if (!peer_ok(to) || !peer_ok(from) || to == impl_->rank || from == impl_->rank)
    throw Error("probe_link: peers " + std::to_string(to) + " / " + std::to_string(from) + " invalid for rank " +
                std::to_string(impl_->rank) + " of " + std::to_string(n));
  if (bytes < 1 || bytes > INT_MAX || rounds < 1) throw Error("probe_link: bad size or rounds");
  OpInfo info = make_op_info("probe_link", at::Tensor(), bytes, std::move(tag));
  info.dtype = "uint8";
  info.metered = false;
  MPI_Comm comm = impl_->comm;
  return impl_->thread.submit(std::move(info), [to, from, bytes, rounds, seconds, comm]() {
    constexpr int kData = 1, kAck = 2;
    std::vector<char> out(to >= 0 ? bytes : 0, 1), in(from >= 0 ? bytes : 0);
    char ack_out = 1, ack_in = 0;
    double best = 0;
    for (int round = 0; round < rounds; ++round) {
      MPI_Request recv_data = MPI_REQUEST_NULL, recv_ack = MPI_REQUEST_NULL, send_data = MPI_REQUEST_NULL;
      const auto t0 = std::chrono::steady_clock::now();
      if (from >= 0)
        HPC_MPI_CHECK(MPI_Irecv(in.data(), static_cast<int>(bytes), MPI_BYTE, from, kData, comm, &recv_data));
      if (to >= 0) {
        HPC_MPI_CHECK(MPI_Irecv(&ack_in, 1, MPI_BYTE, to, kAck, comm, &recv_ack));
        HPC_MPI_CHECK(MPI_Isend(out.data(), static_cast<int>(bytes), MPI_BYTE, to, kData, comm, &send_data));
      }
      if (from >= 0) {
        HPC_MPI_CHECK(MPI_Wait(&recv_data, MPI_STATUS_IGNORE));
        HPC_MPI_CHECK(MPI_Send(&ack_out, 1, MPI_BYTE, from, kAck, comm));
      }
      if (to >= 0) {
        HPC_MPI_CHECK(MPI_Wait(&recv_ack, MPI_STATUS_IGNORE));
        double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        HPC_MPI_CHECK(MPI_Wait(&send_data, MPI_STATUS_IGNORE));
        best = round == 0 ? t : std::min(best, t);
      }
    }
    *seconds = best;
  });
}

WorkHandle MpiCommunicator::barrier(std::string tag) {
  MPI_Comm comm = impl_->comm;
  return impl_->thread.submit(make_op_info("barrier", at::Tensor(), 0, std::move(tag)),
                              [comm]() { HPC_MPI_CHECK(MPI_Barrier(comm)); });
}

}  // namespace hpctrain
