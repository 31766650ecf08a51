// Helpers shared by the backends (tensor checks, OpInfo) and the base class's fallbacks:
// reduce_scatter over one allreduce of the whole buffer, allgather_into over one broadcast per
// rank. Backends override both with the native collective.
#include "comm/communicator.h"

#include <ATen/ATen.h>
#include "runtime/tensor_text.h"

#include <c10/core/Device.h>

#include "runtime/check.h"

namespace hpctrain {

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "?";
}

void check_carriable(const Communicator& c, const at::Tensor& t, const char* what) {
  if (!t.defined()) throw Error(std::string(what) + ": undefined tensor");
  if (t.device().type() != c.device_type()) {
    throw Error(std::string(what) + ": tensor is on " + t.device().str() + " but the " + c.name() +
                " communicator carries " + c10::DeviceTypeName(c.device_type(), true) + " tensors");
  }
  if (!t.is_contiguous()) throw Error(std::string(what) + ": tensor must be contiguous");
}

void check_flat_collective(const Communicator& c, const at::Tensor& block, const at::Tensor& flat, const char* what) {
  check_carriable(c, block, what);
  check_carriable(c, flat, what);
  if (block.scalar_type() != flat.scalar_type())
    throw Error(std::string(what) + ": dtypes differ (" + dtype_name(block.scalar_type()) + " and " +
                dtype_name(flat.scalar_type()) + ")");
  if (flat.numel() != block.numel() * c.size())
    throw Error(std::string(what) + ": the flat buffer has " + std::to_string(flat.numel()) + " elements, expected " +
                std::to_string(c.size()) + " x " + std::to_string(block.numel()));
}

bool is_own_block(const at::Tensor& block, const at::Tensor& flat, int rank) {
  return block.numel() > 0 && block.storage().is_alias_of(flat.storage()) &&
         static_cast<const char*>(block.data_ptr()) ==
             static_cast<const char*>(flat.data_ptr()) + rank * block.nbytes();
}

namespace {
struct CompletedWork final : Work {
  void wait() override {}
  bool done() const override { return true; }
};
}  // namespace

// Fallbacks over allreduce / broadcast: the whole buffer is reduced (or assembled from zeros) and the
// caller's block taken. Backends override both with the native collective.
WorkHandle Communicator::reduce_scatter(at::Tensor input, at::Tensor output, ReduceOp op, std::string tag) {
  check_flat_collective(*this, output, input, "reduce_scatter");
  allreduce(input, op, std::move(tag))->wait();
  output.copy_(input.view({-1}).narrow(0, rank() * output.numel(), output.numel()).view(output.sizes()));
  return std::make_shared<CompletedWork>();
}

WorkHandle Communicator::allgather_into(at::Tensor input, at::Tensor output, std::string tag) {
  check_flat_collective(*this, input, output, "allgather_into");
  at::Tensor flat = output.view({-1});
  int64_t n = input.numel();
  if (!is_own_block(input, output, rank())) flat.narrow(0, rank() * n, n).copy_(input.reshape({-1}));
  std::vector<WorkHandle> works;
  for (int r = 0; r < size(); ++r) works.push_back(broadcast(flat.narrow(0, r * n, n), r, tag));
  for (auto& w : works) w->wait();
  return std::make_shared<CompletedWork>();
}

OpInfo make_op_info(const char* op, const at::Tensor& t, int64_t numel, std::string tag) {
  OpInfo i;
  i.op = op;
  i.dtype = t.defined() ? dtype_name(t.scalar_type()) : "none";
  i.numel = numel;
  i.tag = std::move(tag);
  return i;
}

}  // namespace hpctrain
