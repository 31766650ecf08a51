// MpiCommunicator: collectives on CPU tensors over MPI.
//
// Contract (beyond Communicator's):
// - Owns a duplicate of the parent communicator, so its traffic never mixes with other code's.
// - A dedicated comm thread executes operations strictly in submission order; the caller
//   thread never blocks on submission. A caller that waits for an op not yet started, while
//   none is running, runs it (and the ops queued before it) itself (comm/mpi/comm_thread.h),
//   so a synchronous collective costs no thread hand-off. Requires MPI_THREAD_MULTIPLE (World
//   checks it).
// - The reduction path is chosen at construction (collective) from the rank layout and
//   settings.allreduce (comm_settings.h): hierarchical (HierAllreduce: several hosts, some with
//   several ranks), shared memory (ShmAllreduce: every rank on one host), else flat MPI.
//   describe_algorithms() says which, per collective, and why. Ranks that ask for different
//   algorithms get a CollectiveError at construction.
// - float16/bfloat16: inside one host reduced in a float32 staging buffer and rounded once; sums
//   that cross hosts travel as 16 bits, each combine computed in float32 and rounded
//   (comm/mpi/half_sum.h: half the bytes on the link; max/min stay staged in float32).
// - reduce_scatter is MPI_Reduce_scatter_block, allgather_into MPI_Allgather (MPI_IN_PLACE
//   when the input is the rank's own block); a block is limited to 2^31-1 elements. On the
//   shared-memory or hierarchical path both use the allreduce instead:
//   reduce_scatter as an in-place allreduce of `input` (left reduced) and a copy of the block;
//   allgather_into (float32/64, int32/64) as a sum into `output` with the other blocks zeroed.
//   allgather_into gives the MPI path's values (a -0.0 becomes +0.0); reduce_scatter's sums follow the
//   shared-memory allreduce's rank-order sum.
// - The destructor completes every submitted operation, then joins the thread.
// - Every op passes an OpGuard (comm/guard/op_guard.h) configured by `settings`: watchdog lane
//   "mpi" (the given watchdog, shared with other backends, or its own when none is given and
//   the timeout is > 0), flight-recorder lane "cpu", the desync check with debug_collectives
//   (after a desync every later op fails with the same CollectiveError without touching MPI),
//   the wait meter and the trace timeline.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/comm_settings.h"
#include "comm/communicator.h"
#include "comm/run_ops.h"

namespace hpctrain {

class Watchdog;

class MpiCommunicator final : public Communicator, public LinkProber {
 public:
  // Collective over `parent`.
  explicit MpiCommunicator(MPI_Comm parent, CommSettings settings = CommSettings::from_env(),
                           std::shared_ptr<Watchdog> watchdog = nullptr);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override;
  int size() const override;
  c10::DeviceType device_type() const override { return c10::DeviceType::CPU; }
  std::string name() const override { return "mpi"; }

  WorkHandle allreduce(at::Tensor t, ReduceOp op, std::string tag = {}) override;
  WorkHandle allreduce(std::vector<at::Tensor> ts, ReduceOp op, std::string tag = {}) override;
  WorkHandle broadcast(at::Tensor t, int root, std::string tag = {}) override;
  WorkHandle allgather(at::Tensor t, std::vector<at::Tensor>* out, std::string tag = {}) override;
  WorkHandle barrier(std::string tag = {}) override;
  WorkHandle reduce_scatter(at::Tensor input, at::Tensor output, ReduceOp op, std::string tag = {}) override;
  WorkHandle allgather_into(at::Tensor input, at::Tensor output, std::string tag = {}) override;

  WorkHandle probe_link(int to, int from, int64_t bytes, int rounds, double* seconds, std::string tag = {}) override;

  // The raw communicator (for benchmarks that compare against bare MPI).
  MPI_Comm raw() const;
  // The watchdog guarding this communicator; nullptr when the timeout is off.
  Watchdog* watchdog() const;
  // One line per collective: the algorithm it uses on this layout and why (hpctrain doctor).
  std::vector<std::string> describe_algorithms() const;

 private:
  void choose_paths(AllreduceAlgo asked);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hpctrain
