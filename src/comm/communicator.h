// Communicator: the one collective interface the rest of hpctrain uses.
//
// Contract:
// - Every operation is asynchronous and returns a Work handle; wait() blocks until it has
//   completed on this rank and rethrows any error. Operations complete in submission order.
// - All ranks must submit the same operations in the same order (as with any collective
//   library). `tag` names the caller ("ddp.bucket[3]", "sampler") for watchdog and desync
//   reports; it is never compared for correctness unless desync checking is on.
// - Tensors must be contiguous and stay alive and untouched until wait() returns.
// - Dtypes: float32, float64, float16, bfloat16 (reduced in float32 and rounded once inside a
//   host; sums across hosts may round once per combine, as NCCL's do: the MPI backend sends them
//   as 16 bits), int32, int64, uint8 (broadcast/allgather only for uint8). kAvg needs a
//   floating dtype.
// - reduce_scatter and allgather_into work on one flat buffer split into size() equal blocks,
//   block r belonging to rank r (ZeRO's gradient and parameter exchange). Every backend has a
//   native implementation (MPI_Reduce_scatter_block / MPI_Allgather, ncclReduceScatter /
//   ncclAllGather); the base class falls back to one allreduce (reduce_scatter: twice the
//   traffic) and one broadcast per rank (allgather_into), correct, so that
//   test doubles need not implement them.
// - A caller that waits for a collective at once may say so with a CallerWaits scope
//   (comm/caller_waits.h): a hint that lets a backend run it on the caller; results are the same.
// - Link probes and the step for reports are optional extras, not collectives: comm/run_ops.h.
// - The backend is chosen from the tensor's device (see DeviceRouter); a tensor on a device the
//   backend does not serve is an error naming both devices.
// The comm/ stage among the others, its threads and locks: docs/architecture.md.
#pragma once

#include <ATen/core/Tensor.h>

#include "comm/op_info.h"

#include <memory>
#include <string>
#include <vector>

namespace hpctrain {

enum class ReduceOp { kSum, kAvg, kMax, kMin };
const char* to_string(ReduceOp op);

class Work {
 public:
  virtual ~Work() = default;
  // Blocks until complete; rethrows the operation's error, if any. Idempotent.
  virtual void wait() = 0;
  // Non-blocking completion check.
  virtual bool done() const = 0;
};
using WorkHandle = std::shared_ptr<Work>;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The device type whose tensors this communicator carries.
  virtual c10::DeviceType device_type() const = 0;
  virtual std::string name() const = 0;

  // In-place allreduce of one contiguous tensor.
  virtual WorkHandle allreduce(at::Tensor t, ReduceOp op, std::string tag = {}) = 0;
  // In-place allreduce of several tensors of one dtype, as one message.
  virtual WorkHandle allreduce(std::vector<at::Tensor> ts, ReduceOp op, std::string tag = {}) = 0;
  // In-place broadcast of `t` from `root`.
  virtual WorkHandle broadcast(at::Tensor t, int root, std::string tag = {}) = 0;
  // Gathers every rank's tensor; contributions may differ in their first dimension (and may be
  // empty) but must agree in dtype and trailing dims. (*out)[r] is rank r's tensor.
  virtual WorkHandle allgather(at::Tensor t, std::vector<at::Tensor>* out, std::string tag = {}) = 0;
  virtual WorkHandle barrier(std::string tag = {}) = 0;
  // Reduces `input` (numel = size() x output.numel(), contiguous) over ranks and leaves block
  // rank() of the result in `output` (same dtype, must not overlap `input`). Dtype rules as
  // for allreduce (float16/bfloat16 reduced in float32 on MPI). `input` is left unspecified.
  virtual WorkHandle reduce_scatter(at::Tensor input, at::Tensor output, ReduceOp op, std::string tag = {});
  // Gathers every rank's `input` into `output` (numel = size() x input.numel(), same dtype, any
  // dtype): block r of `output` receives rank r's input. `input` may be block rank() of
  // `output` itself (in place, no copy).
  virtual WorkHandle allgather_into(at::Tensor input, at::Tensor output, std::string tag = {});
};

// Checks a tensor can be carried by `c`; throws hpctrain::Error naming the devices otherwise.
void check_carriable(const Communicator& c, const at::Tensor& t, const char* what);

// Checks the shapes of a reduce_scatter / allgather_into (`block` is the per-rank tensor, `flat`
// the size() x block one); throws hpctrain::Error naming `what` and both sizes otherwise.
void check_flat_collective(const Communicator& c, const at::Tensor& block, const at::Tensor& flat, const char* what);
// True when `block` is exactly block `rank` of `flat` (an in-place allgather_into).
bool is_own_block(const at::Tensor& block, const at::Tensor& flat, int rank);

// The OpInfo of `op` on `t` (undefined for barrier: dtype "none"), seq left for the backend.
OpInfo make_op_info(const char* op, const at::Tensor& t, int64_t numel, std::string tag);

}  // namespace hpctrain
