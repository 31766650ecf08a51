// DeviceRouter: each operation goes to the backend of its tensors' device type (MPI for CPU,
// NCCL for CUDA); barrier and link probes always go over MPI. The shared Watchdog (when the
// timeout is > 0) is made here, before both backends.
#include "comm/router.h"
#include "comm/nccl/nccl_communicator.h"

#include "comm/mpi/mpi_communicator.h"
#include "comm/guard/watchdog.h"
#include "runtime/check.h"

namespace hpctrain {

DeviceRouter::DeviceRouter(MPI_Comm parent, int cuda_device, CommSettings settings)
    : watchdog_(settings.collective_timeout_s > 0 ? std::make_shared<Watchdog>(parent, settings.collective_timeout_s)
                                                  : nullptr),
      mpi_(std::make_unique<MpiCommunicator>(parent, settings, watchdog_)) {
  // CUDA builds: comm/nccl/; others: comm/nccl/nccl_nocuda.cpp (refuses, naming why).
  if (cuda_device >= 0) nccl_ = make_nccl_communicator(parent, cuda_device, settings, watchdog_);
}

DeviceRouter::~DeviceRouter() = default;

std::vector<std::string> DeviceRouter::describe_algorithms() const {
  std::vector<std::string> lines;
  if (auto* m = dynamic_cast<const MpiCommunicator*>(mpi_.get())) lines = m->describe_algorithms();
  if (nccl_) lines.push_back("CUDA tensors: NCCL (its own rings and trees inside and across hosts)");
  return lines;
}

int DeviceRouter::rank() const { return mpi_->rank(); }
int DeviceRouter::size() const { return mpi_->size(); }
c10::DeviceType DeviceRouter::device_type() const { return nccl_ ? c10::DeviceType::CUDA : c10::DeviceType::CPU; }
std::string DeviceRouter::name() const { return nccl_ ? "nccl+mpi" : "mpi"; }

bool DeviceRouter::has_backend(c10::DeviceType type) const {
  return type == c10::DeviceType::CPU || (type == c10::DeviceType::CUDA && nccl_);
}

Communicator& DeviceRouter::backend(c10::DeviceType type) {
  if (type == c10::DeviceType::CPU) return *mpi_;
  if (type == c10::DeviceType::CUDA && nccl_) return *nccl_;
  throw Error(std::string("no communicator carries ") + c10::DeviceTypeName(type, true) +
              " tensors in this run (the run's device is " + c10::DeviceTypeName(device_type(), true) + ")");
}

WorkHandle DeviceRouter::allreduce(at::Tensor t, ReduceOp op, std::string tag) {
  if (!t.defined()) throw Error("allreduce: undefined tensor");
  return backend(t.device().type()).allreduce(std::move(t), op, std::move(tag));
}

WorkHandle DeviceRouter::allreduce(std::vector<at::Tensor> ts, ReduceOp op, std::string tag) {
  if (ts.empty()) return mpi_->allreduce(std::move(ts), op, std::move(tag));
  for (auto& t : ts) {
    if (!t.defined()) throw Error("allreduce: undefined tensor in list");
    if (t.device() != ts[0].device())
      throw Error("allreduce: one operation mixes tensors on " + ts[0].device().str() + " and " + t.device().str());
  }
  auto type = ts[0].device().type();
  return backend(type).allreduce(std::move(ts), op, std::move(tag));
}

WorkHandle DeviceRouter::broadcast(at::Tensor t, int root, std::string tag) {
  if (!t.defined()) throw Error("broadcast: undefined tensor");
  return backend(t.device().type()).broadcast(std::move(t), root, std::move(tag));
}

WorkHandle DeviceRouter::allgather(at::Tensor t, std::vector<at::Tensor>* out, std::string tag) {
  if (!t.defined()) throw Error("allgather: undefined tensor");
  return backend(t.device().type()).allgather(std::move(t), out, std::move(tag));
}

// The backend both tensors of a flat collective live on (mixing devices is an error).
Communicator& DeviceRouter::flat_backend(const at::Tensor& a, const at::Tensor& b, const char* what) {
  if (!a.defined() || !b.defined()) throw Error(std::string(what) + ": undefined tensor");
  if (a.device() != b.device())
    throw Error(std::string(what) + ": one operation mixes tensors on " + a.device().str() + " and " +
                b.device().str());
  return backend(a.device().type());
}

WorkHandle DeviceRouter::reduce_scatter(at::Tensor input, at::Tensor output, ReduceOp op, std::string tag) {
  Communicator& c = flat_backend(input, output, "reduce_scatter");
  return c.reduce_scatter(std::move(input), std::move(output), op, std::move(tag));
}

WorkHandle DeviceRouter::allgather_into(at::Tensor input, at::Tensor output, std::string tag) {
  Communicator& c = flat_backend(input, output, "allgather_into");
  return c.allgather_into(std::move(input), std::move(output), std::move(tag));
}

WorkHandle DeviceRouter::barrier(std::string tag) { return mpi_->barrier(std::move(tag)); }

bool DeviceRouter::can_probe_links() const { return link_prober(*mpi_) != nullptr; }

WorkHandle DeviceRouter::probe_link(int to, int from, int64_t bytes, int rounds, double* seconds, std::string tag) {
  LinkProber* p = link_prober(*mpi_);
  if (!p) throw Error("the " + mpi_->name() + " backend cannot probe links (no point-to-point messages)");
  return p->probe_link(to, from, bytes, rounds, seconds, std::move(tag));
}

}  // namespace hpctrain
