// NCCL backend for CUDA tensors. Compiled only in CUDA builds.
//
// Bootstrap: rank 0 calls ncclGetUniqueId and broadcasts it with MPI_Bcast; every rank sets
// its device before ncclCommInitRank. Operations run on the backend's own stream, which waits
// for the caller's current stream through an event (no host sync). Work::wait() makes the
// caller's current stream wait for the operation's completion event, again without blocking
// the host; done() queries the event.
//
// Every op passes an asynchronous OpGuard (comm/guard/op_guard.h): watchdog lane "nccl" from the
// moment it is called (host-side MPI exchanges included) until its completion event fires (the
// watchdog thread polls the event), flight-recorder lane "cuda" (ended when the event is first
// seen fired, by the watchdog's poll or a done() query; failed when launching threw), and with
// debug_collectives the fingerprint exchange over MPI on the calling thread before the op is
// enqueued (blocking the host: debug only). On a timeout the watchdog calls ncclCommAbort
// (freeing the GPU from the stuck kernel) before MPI_Abort.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "comm/guard/op_guard.h"
#include "comm/guard/watchdog.h"
#include "comm/nccl/nccl_communicator.h"
#include "runtime/check.h"

#define HPC_NCCL_CHECK(call)                                                                                      \
  do {                                                                                                            \
    ncclResult_t hpc_nccl_rc_ = (call);                                                                           \
    if (hpc_nccl_rc_ != ncclSuccess)                                                                              \
      throw ::hpctrain::Error("rank " + std::to_string(rank_) + ": NCCL call " #call " failed at " __FILE__ ":" + \
                              std::to_string(__LINE__) + ": " + ncclGetErrorString(hpc_nccl_rc_));                \
  } while (0)

#define HPC_CUDA_CHECK(call)                                                                                      \
  do {                                                                                                            \
    cudaError_t hpc_cuda_rc_ = (call);                                                                            \
    if (hpc_cuda_rc_ != cudaSuccess)                                                                              \
      throw ::hpctrain::Error("rank " + std::to_string(rank_) + ": CUDA call " #call " failed at " __FILE__ ":" + \
                              std::to_string(__LINE__) + ": " + cudaGetErrorString(hpc_cuda_rc_));                \
  } while (0)

namespace hpctrain {
namespace {

ncclDataType_t nccl_type(at::ScalarType s) {
  switch (s) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    case at::kByte: return ncclUint8;
    default: throw Error(std::string("nccl: unsupported dtype ") + c10::toString(s));
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

// One op's completion, shared by its Work handle and the watchdog's probe.
struct NcclOpState {
  at::cuda::CUDAEvent done;
  OpInfo info;
  std::weak_ptr<OpGuard> guard;       // told once when the op has ended (it may be gone by then)
  std::atomic<bool> enqueued{false};  // `done` has been recorded
  std::atomic<bool> failed{false};    // launching threw: nothing to wait for
  mutable std::atomic<bool> ended{false};
  bool finished() const {
    bool f = failed.load() || (enqueued.load() && done.query());
    if (f && !ended.exchange(true))
      if (auto g = guard.lock()) g->end(info, !failed.load());
    return f;
  }
};

class NcclWork final : public Work {
 public:
  explicit NcclWork(std::shared_ptr<NcclOpState> st) : st_(std::move(st)) {}
  void wait() override { st_->done.block(c10::cuda::getCurrentCUDAStream(st_->done.device_index())); }
  bool done() const override { return st_->finished(); }

 private:
  std::shared_ptr<NcclOpState> st_;
};

// The NCCL communicator as the watchdog's abort hook sees it: cleared before ncclCommDestroy,
// so a late abort never touches a destroyed communicator.
struct AbortHandle {
  std::mutex mu;
  ncclComm_t comm = nullptr;
  void abort() {
    std::lock_guard<std::mutex> lk(mu);
    if (comm) ncclCommAbort(comm);
    comm = nullptr;
  }
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(MPI_Comm parent, int device, const CommSettings& settings, std::shared_ptr<Watchdog> watchdog)
      : device_(device) {
    HPC_MPI_CHECK(MPI_Comm_dup(parent, &mpi_));
    Watchdog* wd = watchdog.get();
    guard_ = std::make_shared<OpGuard>(parent, settings, std::move(watchdog), "cuda", "nccl", OpGuard::Lane::kAsync);
    HPC_MPI_CHECK(MPI_Comm_rank(mpi_, &rank_));
    HPC_MPI_CHECK(MPI_Comm_size(mpi_, &size_));
    HPC_CUDA_CHECK(cudaSetDevice(device_));  // before any NCCL context exists
    ncclUniqueId id;
    if (rank_ == 0) HPC_NCCL_CHECK(ncclGetUniqueId(&id));
    HPC_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, mpi_));
    HPC_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
    stream_.emplace(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device_));
    if (wd) {
      abort_->comm = comm_;
      wd->add_abort_hook([h = abort_] { h->abort(); });
    }
  }
  ~NcclCommunicator() override {
    {
      std::lock_guard<std::mutex> lk(abort_->mu);
      abort_->comm = nullptr;
    }
    if (comm_) ncclCommDestroy(comm_);
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    MPI_Comm_free(&mpi_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  c10::DeviceType device_type() const override { return c10::DeviceType::CUDA; }
  std::string name() const override { return "nccl"; }

  WorkHandle allreduce(at::Tensor t, ReduceOp op, std::string tag) override {
    check(t, "allreduce");
    auto st = start(make_op_info("allreduce", t, t.numel(), std::move(tag)));
    return launch(st, {t}, [&] {
      HPC_NCCL_CHECK(ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), nccl_op(op),
                                   comm_, *stream_));
    });
  }

  WorkHandle allreduce(std::vector<at::Tensor> ts, ReduceOp op, std::string tag) override {
    int64_t total = 0;
    for (auto& t : ts) check(t, "allreduce"), total += t.numel();
    auto st = start(make_op_info("allreduce", ts.empty() ? at::Tensor() : ts[0], total, std::move(tag)));
    return launch(st, ts, [&] {
      HPC_NCCL_CHECK(ncclGroupStart());
      for (auto& t : ts)
        HPC_NCCL_CHECK(ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), nccl_op(op),
                                     comm_, *stream_));
      HPC_NCCL_CHECK(ncclGroupEnd());
    });
  }

  WorkHandle broadcast(at::Tensor t, int root, std::string tag) override {
    check(t, "broadcast");
    auto st = start(make_op_info("broadcast", t, t.numel(), std::move(tag)));
    return launch(st, {t}, [&] {
      HPC_NCCL_CHECK(
          ncclBroadcast(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), root, comm_, *stream_));
    });
  }

  // Uneven contributions: the row counts go over MPI (host), then every rank sends a buffer
  // padded to the largest count, and the result is narrowed per rank.
  WorkHandle allgather(at::Tensor t, std::vector<at::Tensor>* out, std::string tag) override {
    check(t, "allgather");
    if (t.dim() == 0) t = t.reshape({1});
    auto st = start(make_op_info("allgather", t, t.numel(), std::move(tag)));
    int64_t rows = t.size(0);
    std::vector<int64_t> all(size_);
    guarded(st, [&] { HPC_MPI_CHECK(MPI_Allgather(&rows, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, mpi_)); });
    int64_t max_rows = *std::max_element(all.begin(), all.end());
    auto shape = t.sizes().vec();
    shape[0] = max_rows;
    at::Tensor send = at::zeros(shape, t.options());
    send.narrow(0, 0, rows).copy_(t);
    shape.insert(shape.begin(), size_);
    at::Tensor recv = at::empty(shape, t.options());
    auto work = launch(st, {send, recv}, [&] {
      HPC_NCCL_CHECK(
          ncclAllGather(send.data_ptr(), recv.data_ptr(), send.numel(), nccl_type(t.scalar_type()), comm_, *stream_));
    });
    out->clear();
    for (int r = 0; r < size_; ++r) out->push_back(recv[r].narrow(0, 0, all[r]));
    return work;
  }

  WorkHandle reduce_scatter(at::Tensor input, at::Tensor output, ReduceOp op, std::string tag) override {
    check(input, "reduce_scatter");
    check(output, "reduce_scatter");
    check_flat_collective(*this, output, input, "reduce_scatter");
    auto st = start(make_op_info("reduce_scatter", input, input.numel(), std::move(tag)));
    return launch(st, {input, output}, [&] {
      HPC_NCCL_CHECK(ncclReduceScatter(input.data_ptr(), output.data_ptr(), output.numel(),
                                       nccl_type(input.scalar_type()), nccl_op(op), comm_, *stream_));
    });
  }

  // In place when `input` is this rank's block of `output` (NCCL's own in-place rule).
  WorkHandle allgather_into(at::Tensor input, at::Tensor output, std::string tag) override {
    check(input, "allgather_into");
    check(output, "allgather_into");
    check_flat_collective(*this, input, output, "allgather_into");
    auto st = start(make_op_info("allgather_into", input, output.numel(), std::move(tag)));
    return launch(st, {input, output}, [&] {
      HPC_NCCL_CHECK(ncclAllGather(input.data_ptr(), output.data_ptr(), input.numel(), nccl_type(input.scalar_type()),
                                   comm_, *stream_));
    });
  }

  WorkHandle barrier(std::string tag) override {
    auto st = start(make_op_info("barrier", at::Tensor(), 0, std::move(tag)));
    guarded(st, [&] { HPC_MPI_CHECK(MPI_Barrier(mpi_)); });
    return launch(st, {}, [] {});
  }

 private:
  void check(const at::Tensor& t, const char* what) const {
    check_carriable(*this, t, what);
    if (t.device().index() != device_)
      throw Error(std::string(what) + ": tensor is on " + t.device().str() +
                  " but this rank's NCCL communicator uses cuda:" + std::to_string(device_));
  }

  // Numbers the op and begins it through the guard (watchdog lane, flight recorder, desync).
  std::shared_ptr<NcclOpState> start(OpInfo i) {
    guard_->submit(i);
    auto st = std::make_shared<NcclOpState>();
    st->info = i;
    st->guard = guard_;
    guarded(st, [&] { guard_->begin(i, [st] { return st->finished(); }); });
    return st;
  }

  // Runs `f`; if it throws, the op is over for the watchdog (it failed, it is not hung).
  template <class F>
  void guarded(const std::shared_ptr<NcclOpState>& st, F&& f) {
    try {
      f();
    } catch (...) {
      st->failed = true;
      st->finished();  // records the failure
      throw;
    }
  }

  template <class F>
  WorkHandle launch(const std::shared_ptr<NcclOpState>& st, const std::vector<at::Tensor>& ts, F&& enqueue) {
    guarded(st, [&] {
      c10::cuda::CUDAGuard guard(device_);
      auto current = c10::cuda::getCurrentCUDAStream(device_);
      at::cuda::CUDAEvent ready;
      ready.record(current);
      ready.block(*stream_);  // the comm stream waits for the producer, the host does not
      enqueue();
      for (auto& t : ts)  // keep the memory alive until the comm stream is done with it
        c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), *stream_);
      st->done.record(*stream_);
      st->enqueued = true;
    });
    return std::make_shared<NcclWork>(st);
  }

  std::shared_ptr<OpGuard> guard_;  // shared: an op's probe may outlive this communicator (weak_ptr)
  MPI_Comm mpi_ = MPI_COMM_NULL;
  std::shared_ptr<AbortHandle> abort_ = std::make_shared<AbortHandle>();
  ncclComm_t comm_ = nullptr;
  int device_ = 0, rank_ = 0, size_ = 1;
  std::optional<c10::cuda::CUDAStream> stream_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm parent, int cuda_device, const CommSettings& settings,
                                                     std::shared_ptr<Watchdog> watchdog) {
  return std::make_unique<NcclCommunicator>(parent, cuda_device, settings, std::move(watchdog));
}

std::string nccl_version_string() {
  int v = 0;
  ncclGetVersion(&v);
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

}  // namespace hpctrain
