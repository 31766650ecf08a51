// FsdpEngine: the flat per-unit layout, shards, gradient reduce-scatters and the end-of-backward
// step. The gathers (storage re-allocated in place, so every parameter and every tensor saved for
// backward that views it sees the gathered values again): fsdp_gather.cpp. The autograd side:
// fsdp_function.cpp.
#include "ddp/fsdp.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <chrono>
#include <map>

#include "comm/guard/op_guard.h"
#include "ddp/fsdp_unit.h"
#include "runtime/check.h"
#include "runtime/clock.h"
#include "runtime/host_tensor.h"
#include "runtime/trace.h"

namespace hpctrain {

FsdpEngine::FsdpEngine(std::vector<FsdpUnitSpec> units, FsdpUnitSpec root, Communicator& comm, FsdpOptions opts)
    : comm_(comm), opts_(opts) {
  if (comm_.device_type() != c10::DeviceType::CPU)
    throw CollectiveError("--zero 3 runs on CPU ranks only (MPI); the NCCL path is not built");
  units.push_back(std::move(root));
  const int world = comm_.size(), rank = comm_.rank();
  partition_.world_size = world;
  const at::ScalarType pd = opts_.param_dtype;
  const bool lowp = pd != at::ScalarType::Undefined && pd != at::kFloat;
  if (lowp && pd != at::kBFloat16 && pd != at::kHalf)
    throw CollectiveError(std::string("--zero 3 gathers parameters in float32, bfloat16 or float16, not ") +
                          c10::toString(pd));
  at::NoGradGuard no_grad;
  for (auto& spec : units) {
    auto u = std::make_unique<Unit>();
    u->name = spec.name;
    ZeroBucket zb;
    zb.dtype = "float32";
    for (auto& [name, p] : spec.params) {
      if (p.scalar_type() != at::kFloat)
        throw CollectiveError("--zero 3 needs float32 parameters; " + name + " is " + c10::toString(p.scalar_type()));
      if (!p.device().is_cpu() && !p.is_meta())
        throw CollectiveError("--zero 3: parameter " + name + " is not on the CPU");
      if (p.is_meta() != spec.params.front().second.is_meta())
        throw CollectiveError("--zero 3: unit " + spec.name + " mixes parameters on the meta device and with values");
      u->names.push_back(name);
      u->params.push_back(p);
      u->offsets.push_back(u->numel);
      zb.params.push_back({name, u->numel, p.numel()});
      u->numel += p.numel();
    }
    u->padded = (u->numel + world - 1) / world * world;
    u->block = u->padded / world;
    zb.numel = u->numel;
    zb.padded = u->padded;
    zb.block = u->block;
    partition_.buckets.push_back(std::move(zb));
    const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat);
    const bool meta = !u->params.empty() && u->params.front().is_meta();
    built_sharded_ = built_sharded_ || meta;
    if (meta) {
      u->shard = at::zeros({u->block}, f32);  // init_shards fills it
    } else {
      // Rank 0's values for everyone (as DDP), then each rank keeps its block.
      at::Tensor full = at::zeros({u->padded}, f32);
      for (size_t i = 0; i < u->params.size(); ++i)
        full.narrow(0, u->offsets[i], u->params[i].numel()).copy_(u->params[i].detach().reshape({-1}));
      if (world > 1 && u->padded > 0) comm_.broadcast(full, 0, "fsdp.init")->wait();
      u->shard = full.narrow(0, rank * u->block, u->block).clone();
    }
    u->grad = at::zeros({u->block}, f32);
    // --amp bf16: a unit's (not the root's) matrices are gathered and computed in param_dtype,
    // its vectors (norm weights, biases) are float32 tensors filled from that gather.
    u->lowp = lowp && &spec != &units.back() && u->padded > 0;
    if (u->lowp)
      for (auto& p : u->params) {
        u->vector_of.push_back(p.dim() < 2 ? u->vnumel : -1);
        if (p.dim() < 2) u->vnumel += p.numel();
      }
    // Never written before its storage is released: the pages are not touched (fsdp_gather.cpp).
    u->flat = unpooled_flat(u->padded, u->lowp ? opts_.param_dtype : at::kFloat);
    if (u->vnumel > 0) u->vflat = unpooled_flat(u->vnumel, at::kFloat);
    for (size_t i = 0; i < u->params.size(); ++i) {
      at::Tensor view = compute_view(*u, i);
      if (meta) {  // a meta tensor cannot take CPU data: a new parameter (the caller installs it)
        at::Tensor p = at::empty({0}, f32);
        p.set_data(view);
        p.set_requires_grad(true);
        u->params[i] = p;
      } else {
        u->params[i].set_data(view);
      }
    }
    resize_storage(u->flat, 0);
    if (u->vflat.defined()) resize_storage(u->vflat, 0);
    units_.push_back(std::move(u));
  }
}

FsdpEngine::~FsdpEngine() {
  try {
    complete_pending(0);
    for (auto& u : units_)
      if (u->work) u->work->wait();
  } catch (...) {
  }
}

size_t FsdpEngine::num_units() const { return units_.size(); }
const std::string& FsdpEngine::unit_name(size_t u) const { return units_.at(u)->name; }

std::vector<at::Tensor> FsdpEngine::param_blocks() const {
  std::vector<at::Tensor> out;
  for (auto& u : units_) out.push_back(u->shard);
  return out;
}
std::vector<at::Tensor> FsdpEngine::grad_blocks() const {
  std::vector<at::Tensor> out;
  for (auto& u : units_) out.push_back(u->grad);
  return out;
}
std::vector<at::Tensor> FsdpEngine::unit_params(size_t u) const { return units_.at(u)->params; }

std::string FsdpEngine::describe() const {
  int64_t shard = 0;
  for (auto& u : units_) shard += u->block;
  return "ZeRO-3: " + std::to_string(units_.size() - 1) + " unit(s) + the root, parameters sharded over " +
         std::to_string(comm_.size()) + " rank(s): " + std::to_string(shard) +
         " elements per rank, largest gathered unit " + std::to_string(largest_unit_bytes()) + " bytes" +
         (gather_dtype_name() == "float32"
              ? std::string()
              : " (its matrices in " + gather_dtype_name() +
                    ", its vectors in float32; the root's parameters in float32, over fp32 master shards)") +
         (built_sharded_ ? ", built shard by shard from the seed (never whole on a rank)" : "");
}

std::string FsdpEngine::wire_dtype_name() const {
  const at::ScalarType cd = opts_.grad_comm_dtype;
  if (cd == at::kBFloat16 && comm_.size() > 1) return "bfloat16";
  if (cd == at::kHalf && comm_.size() > 1) return "float16";
  return "float32";
}

std::string FsdpEngine::describe_comm() const {
  int64_t padded = 0;
  for (auto& u : units_) padded += u->padded;
  const int64_t elt = wire_dtype_name() == "float32" ? 4 : 2;
  return "gradient communication: ZeRO-3, " + wire_dtype_name() + " reduce-scatter per unit (" +
         std::to_string(padded * elt) + " bytes per backward), parameters all-gathered in " + gather_dtype_name() +
         " per unit" + (gather_dtype_name() == "float32" ? "" : " (the root in float32)") + ", " +
         "each unit twice per step (forward, backward), the root once";
}

size_t FsdpEngine::neighbour(size_t u, int dir) const {
  if (!order_known_) return std::string::npos;
  for (size_t k = 0; k < order_.size(); ++k)
    if (order_[k] == u) {
      if (dir > 0) return k + 1 < order_.size() ? order_[k + 1] : std::string::npos;
      return k > 0 ? order_[k - 1] : std::string::npos;
    }
  return std::string::npos;
}

struct FsdpEngine::Pending {
  size_t unit;
  WorkHandle work;
  at::Tensor full, block;
};

// Parameter gradients of unit u (one per parameter, undefined: zero) into this rank's block.
void FsdpEngine::reduce_grads(size_t i, const std::vector<at::Tensor>& grads) {
  Unit& u = *units_.at(i);
  if (u.padded == 0) return;
  at::NoGradGuard no_grad;
  at::Tensor full = empty_unpooled({u.padded}, at::kFloat).zero_();  // unmapped when freed
  for (size_t k = 0; k < u.params.size() && k < grads.size(); ++k)
    if (grads[k].defined()) full.narrow(0, u.offsets[k], u.params[k].numel()).copy_(grads[k].reshape({-1}));
  if (comm_.size() == 1) {
    u.grad.add_(full);
    return;
  }
  full.mul_(1.0 / comm_.size());
  const at::ScalarType cd = opts_.grad_comm_dtype;
  if (cd != at::ScalarType::Undefined && cd != at::kFloat) full = full.to(cd);
  auto p = std::make_unique<Pending>();
  p->unit = i;
  p->full = full;
  p->block = at::empty({u.block}, full.options());
  stats_.bytes_reduced += static_cast<int64_t>(full.nbytes());
  p->work = comm_.reduce_scatter(p->full, p->block, ReduceOp::kSum, "fsdp.grad[" + std::to_string(i) + "]");
  pending_.push_back(std::move(p));
  complete_pending(1);  // at most two full gradients alive: this one and the one before
}

void FsdpEngine::complete_pending(size_t keep) {
  while (pending_.size() > keep) {
    Pending& p = *pending_.front();
    auto t0 = std::chrono::steady_clock::now();
    {
      TraceSpan blocked("comm_blocked", "wait");
      p.work->wait();
    }
    stats_.wait_s += seconds_since(t0);
    units_[p.unit]->grad.add_(p.block.to(at::kFloat));
    pending_.erase(pending_.begin());
  }
}

void FsdpEngine::begin_forward() {
  ran_.clear();
  gather(units_.size() - 1);
  root_open_ = true;
}

void FsdpEngine::check_first_order() {
  agree_first(std::string::npos);
  order_ = ran_;
  order_known_ = true;
}

void FsdpEngine::queue_finalize() {
  if (finalize_queued_) return;
  finalize_queued_ = true;
  queue_backward_callback([this] { finish_backward(); });
}

// End of one backward pass: every unit's reduction done, the root's gradient reduced, the root
// released (its .grad dropped).
void FsdpEngine::finish_backward() {
  finalize_queued_ = false;
  Unit& root = *units_.back();
  std::vector<at::Tensor> grads;
  for (auto& p : root.params) grads.push_back(p.grad());
  reduce_grads(units_.size() - 1, grads);
  complete_pending(0);
  for (auto& p : root.params) p.mutable_grad() = at::Tensor();
  release(units_.size() - 1);
  root_open_ = false;
  std::string missed;
  for (size_t u : awaiting_) missed += (missed.empty() ? "" : ", ") + units_[u]->name;
  awaiting_.clear();
  if (!missed.empty())
    throw Error("--zero 3: at step " + std::to_string(current_step()) + " unit(s) " + missed +
                " ran forward but received no gradient in backward (every unit must contribute to the loss)");
}

void FsdpEngine::zero_grad() {
  for (auto& u : units_) u->grad.zero_();
  stats_ = FsdpStats{};
}

void FsdpEngine::init_shards(const std::vector<std::string>& order, const FsdpParamInit& init) {
  std::map<std::string, std::pair<size_t, size_t>> where;  // name -> (unit, index)
  for (size_t i = 0; i < units_.size(); ++i)
    for (size_t k = 0; k < units_[i]->names.size(); ++k) where.emplace(units_[i]->names[k], std::make_pair(i, k));
  at::NoGradGuard no_grad;
  for (const std::string& name : order) {
    auto it = where.find(name);
    if (it == where.end()) throw Error("--zero 3: init_shards: " + name + " is no sharded parameter");
    Unit& u = *units_[it->second.first];
    const size_t k = it->second.second;
    at::Tensor full = at::empty(u.params[k].sizes(), u.shard.options());
    init(name, full);
    // This rank's part of the parameter: [lo, hi) of the unit's flat space, inside block `rank`.
    const int64_t off = u.offsets[k], n = full.numel(), first = comm_.rank() * u.block;
    const int64_t lo = std::max(off, first), hi = std::min(off + n, first + u.block);
    if (hi > lo) u.shard.narrow(0, lo - first, hi - lo).copy_(full.reshape({-1}).narrow(0, lo - off, hi - lo));
    where.erase(it);
  }
  for (auto& [name, at_unit] : where)
    if (units_[at_unit.first]->params[at_unit.second].numel() > 0)
      throw Error("--zero 3: init_shards: no initial value for " + name);
}

void FsdpEngine::load_unit(size_t i, const NamedTensors& full) {
  Unit& u = *units_.at(i);
  at::NoGradGuard no_grad;
  at::Tensor flat = at::zeros({u.padded}, u.shard.options());
  std::vector<char> seen(u.params.size(), 0);
  for (auto& [name, t] : full)
    for (size_t k = 0; k < u.names.size(); ++k)
      if (u.names[k] == name) {
        flat.narrow(0, u.offsets[k], u.params[k].numel()).copy_(t.reshape({-1}));
        seen[k] = 1;
      }
  for (size_t k = 0; k < seen.size(); ++k)
    if (!seen[k]) throw Error("--zero 3: no value for parameter " + u.names[k] + " of unit " + u.name);
  u.shard.copy_(flat.narrow(0, comm_.rank() * u.block, u.block));
}

}  // namespace hpctrain
