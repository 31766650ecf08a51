#include "comm/communicator.h"

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

OpInfo make_op_info(const char* op, const at::Tensor& t, int64_t numel, std::string tag) {
  OpInfo i;
  i.op = op;
  i.dtype = t.defined() ? dtype_name(t.scalar_type()) : "none";
  i.numel = numel;
  i.tag = std::move(tag);
  return i;
}

}  // namespace hpctrain
