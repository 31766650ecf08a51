// NCCL backend for CUDA tensors. Compiled only in CUDA builds.
//
// Bootstrap: rank 0 calls ncclGetUniqueId and broadcasts it with MPI_Bcast; every rank sets
// its device before ncclCommInitRank. Operations run on the backend's own stream, which waits
// for the caller's current stream through an event (no host sync). Work::wait() makes the
// caller's current stream wait for the operation's completion event, again without blocking
// the host; done() queries the event.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>

#include "comm/router.h"
#include "runtime/check.h"

#define HPC_NCCL_CHECK(call)                                                                \
  do {                                                                                      \
    ncclResult_t hpc_nccl_rc_ = (call);                                                     \
    if (hpc_nccl_rc_ != ncclSuccess)                                                        \
      throw ::hpctrain::Error("rank " + std::to_string(rank_) + ": NCCL call " #call        \
                              " failed at " __FILE__ ":" + std::to_string(__LINE__) + ": " + \
                              ncclGetErrorString(hpc_nccl_rc_));                            \
  } while (0)

#define HPC_CUDA_CHECK(call)                                                               \
  do {                                                                                     \
    cudaError_t hpc_cuda_rc_ = (call);                                                     \
    if (hpc_cuda_rc_ != cudaSuccess)                                                       \
      throw ::hpctrain::Error("rank " + std::to_string(rank_) + ": CUDA call " #call       \
                              " failed at " __FILE__ ":" + std::to_string(__LINE__) + ": " + \
                              cudaGetErrorString(hpc_cuda_rc_));                           \
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

class NcclWork final : public Work {
 public:
  explicit NcclWork(at::cuda::CUDAEvent&& ev) : done_(std::move(ev)) {}
  void wait() override { done_.block(c10::cuda::getCurrentCUDAStream(done_.device_index())); }
  bool done() const override { return done_.query(); }

 private:
  mutable at::cuda::CUDAEvent done_;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(MPI_Comm parent, int device) : device_(device) {
    HPC_MPI_CHECK(MPI_Comm_dup(parent, &mpi_));
    HPC_MPI_CHECK(MPI_Comm_rank(mpi_, &rank_));
    HPC_MPI_CHECK(MPI_Comm_size(mpi_, &size_));
    HPC_CUDA_CHECK(cudaSetDevice(device_));  // before any NCCL context exists
    ncclUniqueId id;
    if (rank_ == 0) HPC_NCCL_CHECK(ncclGetUniqueId(&id));
    HPC_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, mpi_));
    HPC_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
    stream_.emplace(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device_));
  }
  ~NcclCommunicator() override {
    if (comm_) ncclCommDestroy(comm_);
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Comm_free(&mpi_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  c10::DeviceType device_type() const override { return c10::DeviceType::CUDA; }
  std::string name() const override { return "nccl"; }

  WorkHandle allreduce(at::Tensor t, ReduceOp op, std::string tag) override {
    check(t, "allreduce");
    return launch({t}, [&] {
      HPC_NCCL_CHECK(ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(),
                                   nccl_type(t.scalar_type()), nccl_op(op), comm_, *stream_));
    });
  }

  WorkHandle allreduce(std::vector<at::Tensor> ts, ReduceOp op, std::string tag) override {
    for (auto& t : ts) check(t, "allreduce");
    return launch(ts, [&] {
      HPC_NCCL_CHECK(ncclGroupStart());
      for (auto& t : ts)
        HPC_NCCL_CHECK(ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(),
                                     nccl_type(t.scalar_type()), nccl_op(op), comm_, *stream_));
      HPC_NCCL_CHECK(ncclGroupEnd());
    });
  }

  WorkHandle broadcast(at::Tensor t, int root, std::string tag) override {
    check(t, "broadcast");
    return launch({t}, [&] {
      HPC_NCCL_CHECK(ncclBroadcast(t.data_ptr(), t.data_ptr(), t.numel(),
                                   nccl_type(t.scalar_type()), root, comm_, *stream_));
    });
  }

  // Uneven contributions: the row counts go over MPI (host), then every rank sends a buffer
  // padded to the largest count, and the result is narrowed per rank.
  WorkHandle allgather(at::Tensor t, std::vector<at::Tensor>* out, std::string tag) override {
    check(t, "allgather");
    if (t.dim() == 0) t = t.reshape({1});
    int64_t rows = t.size(0);
    std::vector<int64_t> all(size_);
    HPC_MPI_CHECK(MPI_Allgather(&rows, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, mpi_));
    int64_t max_rows = *std::max_element(all.begin(), all.end());
    auto shape = t.sizes().vec();
    shape[0] = max_rows;
    at::Tensor send = at::zeros(shape, t.options());
    send.narrow(0, 0, rows).copy_(t);
    shape.insert(shape.begin(), size_);
    at::Tensor recv = at::empty(shape, t.options());
    auto work = launch({send, recv}, [&] {
      HPC_NCCL_CHECK(ncclAllGather(send.data_ptr(), recv.data_ptr(), send.numel(),
                                   nccl_type(t.scalar_type()), comm_, *stream_));
    });
    out->clear();
    for (int r = 0; r < size_; ++r) out->push_back(recv[r].narrow(0, 0, all[r]));
    return work;
  }

  WorkHandle barrier(std::string tag) override {
    HPC_MPI_CHECK(MPI_Barrier(mpi_));
    return launch({}, [] {});
  }

 private:
  void check(const at::Tensor& t, const char* what) const {
    check_carriable(*this, t, what);
    if (t.device().index() != device_)
      throw Error(std::string(what) + ": tensor is on " + t.device().str() +
                  " but this rank's NCCL communicator uses cuda:" + std::to_string(device_));
  }

  template <class F>
  WorkHandle launch(const std::vector<at::Tensor>& ts, F&& enqueue) {
    c10::cuda::CUDAGuard guard(device_);
    auto current = c10::cuda::getCurrentCUDAStream(device_);
    at::cuda::CUDAEvent ready;
    ready.record(current);
    ready.block(*stream_);  // the comm stream waits for the producer, the host does not
    enqueue();
    for (auto& t : ts)  // keep the memory alive until the comm stream is done with it
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), *stream_);
    at::cuda::CUDAEvent done;
    done.record(*stream_);
    return std::make_shared<NcclWork>(std::move(done));
  }

  MPI_Comm mpi_ = MPI_COMM_NULL;
  ncclComm_t comm_ = nullptr;
  int device_ = 0, rank_ = 0, size_ = 1;
  std::optional<c10::cuda::CUDAStream> stream_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm parent, int cuda_device) {
  return std::make_unique<NcclCommunicator>(parent, cuda_device);
}

std::string nccl_version_string() {
  int v = 0;
  ncclGetVersion(&v);
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

}  // namespace hpctrain
