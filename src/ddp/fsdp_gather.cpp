// FsdpEngine's gather path: a unit's storage re-allocated in place and all-gathered (in float32,
// or under FsdpOptions::param_dtype each rank's fp32 block cast to bf16 and the unit gathered in
// bf16, its vectors then filled in float32), prefetch, release to 0 bytes, the fp32 gathers of
// the master values for checkpoints, and the whole-parameter state a resume loads into.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>

#include <chrono>
#include <map>

#include "ddp/fsdp.h"
#include "ddp/fsdp_unit.h"
#include "runtime/clock.h"
#include "runtime/host_tensor.h"
#include "runtime/trace.h"

namespace hpctrain {

void resize_storage(const at::Tensor& t, int64_t bytes) {
  at::native::resize_bytes_cpu(t.storage().unsafeGetStorageImpl(), static_cast<size_t>(bytes));
}

at::Tensor raw_alias(const at::Tensor& flat, int64_t numel) {
  return at::from_blob(flat.storage().mutable_data(), {numel}, flat.options());
}

at::Tensor unpooled_flat(int64_t n, at::ScalarType dtype) {
  const auto opts = at::TensorOptions().dtype(dtype);
  c10::Storage storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(n) * c10::elementSize(dtype),
                       unpooled_allocator(), /*resizable=*/true);
  return at::empty({0}, opts).set_(storage, 0, {n}, {1});
}

at::Tensor compute_view(const FsdpEngine::Unit& u, size_t k) {
  const at::Tensor& p = u.params[k];
  if (u.lowp && u.vector_of[k] >= 0) return u.vflat.narrow(0, u.vector_of[k], p.numel()).view(p.sizes());
  return u.flat.narrow(0, u.offsets[k], p.numel()).view(p.sizes());
}

namespace {
// A lowp unit's gather has landed: its vectors' float32 tensors get the gathered values.
void fill_vectors(FsdpEngine::Unit& u) {
  u.send = at::Tensor();
  if (!u.lowp || u.vnumel == 0) return;
  resize_storage(u.vflat, u.vnumel * 4);
  at::Tensor dst = raw_alias(u.vflat, u.vnumel), src = raw_alias(u.flat, u.padded);
  for (size_t k = 0; k < u.params.size(); ++k)
    if (u.vector_of[k] >= 0)
      dst.narrow(0, u.vector_of[k], u.params[k].numel()).copy_(src.narrow(0, u.offsets[k], u.params[k].numel()));
}
int64_t gathered_bytes(const FsdpEngine::Unit& u) {
  return u.padded * static_cast<int64_t>(u.flat.element_size()) + u.vnumel * 4;
}
}  // namespace

std::string FsdpEngine::gather_dtype_name() const {
  const at::ScalarType pd = opts_.param_dtype;
  if (pd == at::kBFloat16) return "bfloat16";
  if (pd == at::kHalf) return "float16";
  return "float32";
}

int64_t FsdpEngine::resident_param_bytes() const {
  int64_t n = 0;
  for (auto& u : units_) {
    n += static_cast<int64_t>(u->flat.storage().nbytes() + u->shard.nbytes());
    if (u->vflat.defined()) n += static_cast<int64_t>(u->vflat.storage().nbytes());
    if (u->master.defined()) n += static_cast<int64_t>(u->master.nbytes());
  }
  return n;
}

int64_t FsdpEngine::largest_unit_bytes() const {
  int64_t n = 0;
  for (auto& u : units_) n = std::max<int64_t>(n, gathered_bytes(*u));
  return n;
}

void FsdpEngine::prefetch(size_t i) {
  if (i >= units_.size()) return;
  Unit& u = *units_[i];
  if (u.gathered || u.work) return;
  if (u.padded == 0) {
    u.gathered = true;
    return;
  }
  const int64_t bytes = u.padded * static_cast<int64_t>(u.flat.element_size());
  resize_storage(u.flat, bytes);
  at::Tensor out = raw_alias(u.flat, u.padded);
  stats_.bytes_gathered += bytes;
  // Under param_dtype each rank rounds its fp32 master block (round to nearest even, as autocast's
  // cast does) and the unit travels in that dtype.
  at::Tensor send = u.lowp ? u.shard.to(u.flat.scalar_type()) : u.shard;
  if (comm_.size() == 1) {
    out.copy_(send);
    fill_vectors(u);
    u.gathered = true;
    return;
  }
  if (u.lowp) u.send = send;
  u.work = comm_.allgather_into(send, out, "fsdp.gather[" + std::to_string(i) + "]");
}

void FsdpEngine::gather(size_t i) {
  Unit& u = *units_.at(i);
  if (u.gathered) return;
  if (!u.work) prefetch(i);
  if (u.work) {
    auto t0 = std::chrono::steady_clock::now();
    TraceSpan blocked("comm_blocked", "wait");
    u.work->wait();
    u.work.reset();
    stats_.wait_s += seconds_since(t0);
    fill_vectors(u);
  }
  u.gathered = true;
}

void FsdpEngine::release(size_t i) {
  Unit& u = *units_.at(i);
  if (u.work) {
    u.work->wait();
    u.work.reset();
  }
  u.send = at::Tensor();
  resize_storage(u.flat, 0);
  if (u.vflat.defined()) resize_storage(u.vflat, 0);
  u.gathered = false;
}

// The fp32 master values (never the gather dtype's rounding): this rank's blocks all-gathered in
// float32 into a fresh buffer, whatever the unit computes in.
NamedTensors FsdpEngine::gather_unit(size_t i) {
  Unit& u = *units_.at(i);
  at::Tensor full = at::empty({u.padded}, u.shard.options());
  if (u.padded > 0) {
    if (comm_.size() == 1)
      full.copy_(u.shard);
    else
      comm_.allgather_into(u.shard, full, "fsdp.master_gather[" + std::to_string(i) + "]")->wait();
  }
  NamedTensors out;
  for (size_t k = 0; k < u.params.size(); ++k)
    out.emplace_back(u.names[k], full.narrow(0, u.offsets[k], u.params[k].numel()).view(u.params[k].sizes()));
  return out;
}

void FsdpEngine::capture_full(NamedTensors& tensors) {
  std::map<std::string, size_t> at_name;
  for (size_t k = 0; k < tensors.size(); ++k) at_name.emplace(tensors[k].first, k);
  for (size_t i = 0; i < units_.size(); ++i)
    for (auto& [name, t] : gather_unit(i)) {
      auto it = at_name.find("model/" + name);
      if (it != at_name.end()) tensors[it->second].second = t;
    }
}

// A float32 unit loads into its own flat buffer; a lowp unit's parameters become views of an
// fp32 `master` buffer meanwhile, so a checkpoint's values arrive unrounded.
void FsdpEngine::materialize() {
  for (size_t i = 0; i < units_.size(); ++i) {
    Unit& u = *units_[i];
    if (u.lowp) {
      release(i);
      u.master = at::zeros({u.padded}, u.shard.options());
      for (size_t k = 0; k < u.params.size(); ++k)
        u.params[k].set_data(u.master.narrow(0, u.offsets[k], u.params[k].numel()).view(u.params[k].sizes()));
      continue;
    }
    if (u.work) u.work->wait();
    u.work.reset();
    resize_storage(u.flat, u.padded * 4);
    u.gathered = true;
  }
}

void FsdpEngine::shard_from_params(bool loaded) {
  for (size_t i = 0; i < units_.size(); ++i) {
    Unit& u = *units_[i];
    at::Tensor whole = u.lowp ? u.master : raw_alias(u.flat, u.padded);
    if (loaded && u.padded > 0) u.shard.copy_(whole.narrow(0, comm_.rank() * u.block, u.block));
    if (u.lowp) {  // back to the compute views (their storage given bytes while the views are made)
      resize_storage(u.flat, u.padded * static_cast<int64_t>(u.flat.element_size()));
      if (u.vflat.defined()) resize_storage(u.vflat, u.vnumel * 4);
      for (size_t k = 0; k < u.params.size(); ++k) u.params[k].set_data(compute_view(u, k));
      u.master = at::Tensor();
    }
    release(i);
  }
}

}  // namespace hpctrain
