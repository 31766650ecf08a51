// Collective benchmarks: per size, one checked call of each (same inputs, results compared), then
// ours and the bare MPI call alternate for 3 rounds on fresh buffers, after 2 warm-up calls each;
// each round is timed on the slowest rank (MPI_MAX) and the median round is reported.
#include "diag/bench.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <functional>

#include "comm/blocking.h"
#include "comm/mpi/half_sum.h"
#include "comm/mpi/mpi_communicator.h"
#include "runtime/check.h"

namespace hpctrain {
namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Time of `iters` calls of `fn`, slowest rank.
template <class F>
double timed(MPI_Comm comm, int iters, F&& fn) {
  HPC_MPI_CHECK(MPI_Barrier(comm));
  double t0 = now_s();
  for (int i = 0; i < iters; ++i) fn();
  double dt = now_s() - t0, worst = 0;
  HPC_MPI_CHECK(MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, comm));
  return worst;
}

// Rank-dependent small integers: exact in float32 and bfloat16, and so are their sums over ranks
// (at most size() x (size() + 8), well under bfloat16's 256), in any order.
void fill_check(at::Tensor& t, int rank) {
  t.copy_(at::arange(t.numel(), at::kLong).remainder(7).add_(rank + 1).to(t.scalar_type()));
}

// Elements, summed over ranks, where `ours` differs from `bare` (bitwise after the exact sums).
int64_t count_wrong(const at::Tensor& ours, const at::Tensor& bare, MPI_Comm comm) {
  int64_t mine = ours.ne(bare).sum().item<int64_t>(), all = 0;
  HPC_MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_INT64_T, MPI_SUM, comm));
  return all;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

std::vector<AllreduceBenchRow> bench_allreduce(MpiCommunicator& comm, int64_t min_bytes, int64_t max_bytes, int iters) {
  return bench_collective(comm, "allreduce", min_bytes, max_bytes, iters);
}

std::vector<AllreduceBenchRow> bench_collective(MpiCommunicator& comm, const std::string& op, int64_t min_bytes,
                                                int64_t max_bytes, int iters, bool bf16) {
  if (op != "allreduce" && op != "reduce_scatter" && op != "allgather")
    throw Error("bench: unknown collective " + op + " (allreduce, reduce_scatter, allgather)");
  if (bf16 && op != "allreduce") throw Error("bench " + op + ": bfloat16 is measured for allreduce only");
  const int64_t elem = bf16 ? 2 : 4;
  std::vector<AllreduceBenchRow> rows;
  const int n = comm.size();
  const double bus = n == 1 ? 1.0 : op == "allreduce" ? 2.0 * (n - 1) / n : double(n - 1) / n;
  MPI_Comm raw = comm.raw();
  for (int64_t bytes = std::max<int64_t>(min_bytes, 4 * n); bytes <= max_bytes; bytes *= 2) {
    int64_t block = bytes / elem / n, count = op == "allreduce" ? bytes / elem : block * n;
    // Fresh buffers per size, so no size benefits from an earlier one's cache state.
    const at::ScalarType dt = bf16 ? at::kBFloat16 : at::kFloat;
    at::Tensor ours = at::ones({count}, dt), bare = at::ones({count}, dt);
    at::Tensor ours_out = at::empty({block}), bare_out = at::empty({block});
    int64_t scaled = iters * int64_t(4 << 20) / std::max<int64_t>(bytes, 4 << 20);
    int it = static_cast<int>(std::max<int64_t>(5, scaled));
    std::function<void()> run_ours, run_bare;
    if (op == "allreduce") {
      run_ours = [&] { allreduce_now(comm, ours, ReduceOp::kSum, "bench"); };  // synchronous: runs on this thread
      MPI_Datatype type = bf16 ? MPI_UINT16_T : MPI_FLOAT;
      MPI_Op sum = bf16 ? half_sum_op(at::kBFloat16) : MPI_SUM;
      run_bare = [&, type, sum] {
        HPC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, bare.data_ptr(), static_cast<int>(count), type, sum, raw));
      };
    } else if (op == "reduce_scatter") {
      run_ours = [&] { reduce_scatter_now(comm, ours, ours_out, ReduceOp::kSum, "bench"); };
      run_bare = [&] {
        HPC_MPI_CHECK(MPI_Reduce_scatter_block(bare.data_ptr(), bare_out.data_ptr(), static_cast<int>(block), MPI_FLOAT,
                                               MPI_SUM, raw));
      };
    } else {
      at::Tensor mine = ours.narrow(0, comm.rank() * block, block);
      run_ours = [&, mine] { allgather_into_now(comm, mine, ours, "bench"); };
      run_bare = [&] {
        HPC_MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, bare.data_ptr(), static_cast<int>(block),
                                    MPI_FLOAT, raw));
      };
    }
    // The check: both on the same inputs; for allgather each rank's block of both buffers.
    fill_check(ours, comm.rank());
    fill_check(bare, comm.rank());
    run_ours();
    run_bare();
    const int64_t wrong = op == "reduce_scatter" ? count_wrong(ours_out, bare_out, raw) : count_wrong(ours, bare, raw);
    ours.fill_(1);
    bare.fill_(1);
    for (int w = 0; w < 2; ++w) run_ours(), run_bare();  // warm-up
    std::vector<double> t_ours, t_bare;
    for (int round = 0; round < 3; ++round) {
      t_ours.push_back(timed(raw, it, run_ours) / it);
      t_bare.push_back(timed(raw, it, run_bare) / it);
    }
    AllreduceBenchRow r;
    r.bytes = count * elem;
    r.iters = it;
    r.wrong = wrong;
    r.time_us = median(t_ours) * 1e6;
    r.mpi_time_us = median(t_bare) * 1e6;
    r.algbw_GBps = r.bytes / (r.time_us * 1e-6) / 1e9;
    r.busbw_GBps = r.algbw_GBps * bus;
    r.mpi_algbw_GBps = r.bytes / (r.mpi_time_us * 1e-6) / 1e9;
    r.mpi_busbw_GBps = r.mpi_algbw_GBps * bus;
    rows.push_back(r);
  }
  return rows;
}

}  // namespace hpctrain
