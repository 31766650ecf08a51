// DeviceRouter: a Communicator that sends each operation to the backend serving the tensors'
// device: MPI for CPU tensors, NCCL for CUDA tensors (when built with CUDA and a GPU is used).
// Mixing devices in one operation is an error naming both devices.
// Both backends share one Watchdog (one watchdog thread per rank) configured by `settings`.
#pragma once

#include <mpi.h>

#include <memory>

#include "comm/comm_settings.h"
#include "comm/communicator.h"
#include "comm/run_ops.h"

namespace hpctrain {

class Watchdog;

class DeviceRouter final : public Communicator, public LinkProber {
 public:
  // `cuda_device` >= 0 creates the NCCL backend on that device (collective over `parent`:
  // every rank must pass >= 0, or every rank -1). Every rank must pass the same settings.
  DeviceRouter(MPI_Comm parent, int cuda_device, CommSettings settings = CommSettings::from_env());
  ~DeviceRouter() override;

  int rank() const override;
  int size() const override;
  // The device type of the preferred backend (CUDA when NCCL is up, else CPU).
  c10::DeviceType device_type() const override;
  std::string name() const override;

  WorkHandle allreduce(at::Tensor t, ReduceOp op, std::string tag = {}) override;
  WorkHandle allreduce(std::vector<at::Tensor> ts, ReduceOp op, std::string tag = {}) override;
  WorkHandle broadcast(at::Tensor t, int root, std::string tag = {}) override;
  WorkHandle allgather(at::Tensor t, std::vector<at::Tensor>* out, std::string tag = {}) override;
  WorkHandle barrier(std::string tag = {}) override;
  WorkHandle reduce_scatter(at::Tensor input, at::Tensor output, ReduceOp op, std::string tag = {}) override;
  WorkHandle allgather_into(at::Tensor input, at::Tensor output, std::string tag = {}) override;
  bool can_probe_links() const override;
  // Over MPI (host memory), whichever backend carries the tensors.
  WorkHandle probe_link(int to, int from, int64_t bytes, int rounds, double* seconds, std::string tag = {}) override;

  // The watchdog of this rank; nullptr when the timeout is off.
  Watchdog* watchdog() const { return watchdog_.get(); }
  // One line per collective of the MPI backend (MpiCommunicator::describe_algorithms), then one
  // for NCCL when it is up.
  std::vector<std::string> describe_algorithms() const;

  // The backend for a device type; throws if none serves it.
  Communicator& backend(c10::DeviceType type);
  bool has_backend(c10::DeviceType type) const;

 private:
  Communicator& flat_backend(const at::Tensor& a, const at::Tensor& b, const char* what);

  std::shared_ptr<Watchdog> watchdog_;  // outlives both backends (declared first)
  std::unique_ptr<Communicator> mpi_, nccl_;
};

}  // namespace hpctrain
