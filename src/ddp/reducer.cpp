// Reducer: each .grad is a view of its bucket slot from the start, scaled by 1/world when its
// hook fires; buckets launch strictly in plan order, under one mutex. Under ZeRO-1 a bucket is
// reduce-scattered into this rank's block instead of allreduced. Under ZeRO-2 the bucket buffers
// exist only between a bucket's first gradient and the end of its reduce-scatter.
#include "ddp/reducer.h"

#include <ATen/ATen.h>

#include <chrono>

#include "ddp/zero_partition.h"
#include "runtime/check.h"
#include "runtime/trace.h"

namespace hpctrain {

Reducer::Reducer(std::vector<at::Tensor> params, std::vector<std::string> names, BucketPlan plan, Communicator& comm,
                 ReducerOptions opts)
    : params_(std::move(params)),
      names_(std::move(names)),
      plan_(std::move(plan)),
      comm_(comm),
      opts_(opts),
      scale_(1.0 / comm.size()) {
  slots_.resize(params_.size());
  const ZeroPartition* z = opts_.zero;
  if (z && (z->buckets.size() != plan_.buckets.size() || z->world_size != comm_.size()))
    throw Error("DDP: the ZeRO partition does not match the bucket plan and world size");
  if (opts_.shard_gradients && !z) throw Error("DDP: sharded gradients (ZeRO-2) need a ZeRO partition");
  if (z && !params_.empty()) grad_shard_ = at::zeros({z->shard_numel()}, params_[0].options().requires_grad(false));
  if (!params_.empty()) grad_dtype_ = params_[0].scalar_type();
  const bool lazy = opts_.shard_gradients;  // ZeRO-2: buffers come and go with each backward
  for (size_t b = 0; b < plan_.buckets.size(); ++b) {
    const Bucket& bk = plan_.buckets[b];
    const at::Tensor& first = params_[bk.params.front()];
    int64_t numel = z ? z->buckets[b].padded : bk.numel;  // padding stays zero
    bucket_numel_.push_back(numel);
    buffers_.push_back(lazy ? at::Tensor() : at::zeros({numel}, first.options().requires_grad(false)));
    if (z) grad_blocks_.push_back(grad_shard_.narrow(0, z->shard_offset(b), z->buckets[b].block));
    const at::ScalarType cd = opts_.comm_dtype;
    if (cd != at::ScalarType::Undefined && cd != first.scalar_type() && comm_.size() > 1) {
      if (!at::isFloatingType(cd) || !at::isFloatingType(first.scalar_type()))
        throw Error(std::string("DDP: gradients of dtype ") + c10::toString(first.scalar_type()) +
                    " cannot be communicated as " + c10::toString(cd));
      cast_ = true;
      comm_bufs_.push_back(lazy ? at::Tensor() : at::zeros({numel}, first.options().dtype(cd).requires_grad(false)));
      if (z) comm_blocks_.push_back(at::zeros({z->buckets[b].block}, first.options().dtype(cd).requires_grad(false)));
    }
    if (lazy) continue;
    for (size_t s = 0; s < bk.params.size(); ++s) {
      size_t i = bk.params[s];
      slots_[i] = buffers_[b].narrow(0, bk.offsets[s], params_[i].numel()).view(params_[i].sizes());
    }
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    auto dev = params_[i].device().type();
    if (dev != comm_.device_type())
      throw Error("DDP: parameter " + names_[i] + " is on " + params_[i].device().str() + " but the communicator (" +
                  comm_.name() + ") carries " + c10::DeviceTypeName(comm_.device_type(), true) +
                  " tensors; move the model to the run's device before wrapping it");
    // Gradients live in bucket memory from the start: autograd accumulates into the view.
    // ZeRO-2: no gradient between steps.
    params_[i].mutable_grad() = lazy ? at::Tensor() : slots_[i];
  }
  reset();
}

void Reducer::reset() {
  std::lock_guard<std::mutex> lk(mu_);
  filled_.assign(params_.size(), 0);
  pending_.resize(plan_.buckets.size());
  for (size_t b = 0; b < plan_.buckets.size(); ++b) pending_[b] = static_cast<int64_t>(plan_.buckets[b].params.size());
  works_.clear();  // a collective still in flight keeps its own references to its tensors
  work_bucket_.clear();
  if (opts_.shard_gradients)
    for (size_t b = 0; b < buffers_.size(); ++b) release_bucket_locked(b);
  next_launch_ = 0;
  launched_bytes_ = 0;
  peak_held_ = 0;
  any_ready_ = false;
}

// Makes parameter i's .grad the bucket view again, copying a gradient that autograd placed
// elsewhere (first step after the user set grads to none, or a non-view accumulation).
void Reducer::bind_grad_locked(size_t i) {
  at::Tensor& g = params_[i].mutable_grad();
  if (!g.defined()) {
    slots_[i].zero_();
  } else if (!g.is_same(slots_[i]) && g.data_ptr() != slots_[i].data_ptr()) {
    slots_[i].copy_(g);
  }
  g = slots_[i];
}

void Reducer::ensure_bucket_locked(size_t b) {
  if (buffers_[b].defined()) return;
  const Bucket& bk = plan_.buckets[b];
  const at::Tensor& first = params_[bk.params.front()];
  buffers_[b] = at::zeros({bucket_numel_[b]}, first.options().requires_grad(false));  // padding and unused: zeros
  if (cast_)
    comm_bufs_[b] = at::empty({bucket_numel_[b]}, first.options().dtype(opts_.comm_dtype).requires_grad(false));
  for (size_t s = 0; s < bk.params.size(); ++s) {
    size_t i = bk.params[s];
    slots_[i] = buffers_[b].narrow(0, bk.offsets[s], params_[i].numel()).view(params_[i].sizes());
  }
  peak_held_ = std::max(peak_held_, held_bytes_locked());
}

void Reducer::release_bucket_locked(size_t b, bool keep_comm_copy) {
  for (size_t i : plan_.buckets[b].params) slots_[i] = at::Tensor();
  buffers_[b] = at::Tensor();
  if (cast_ && !keep_comm_copy) comm_bufs_[b] = at::Tensor();
}

void Reducer::release_done_locked() {
  for (size_t k = 0; k < works_.size(); ++k) {
    const size_t b = work_bucket_[k];
    if ((buffers_[b].defined() || (cast_ && comm_bufs_[b].defined())) && works_[k]->done()) release_bucket_locked(b);
  }
}

// ZeRO-2: the gradient autograd accumulated for parameter i goes into its (fresh) bucket slot;
// .grad is then dropped, so the full-size gradient does not outlive this hook.
void Reducer::take_grad_locked(size_t i) {
  ensure_bucket_locked(plan_.bucket_of[i]);
  at::Tensor& g = params_[i].mutable_grad();
  if (g.defined()) slots_[i].copy_(g);
  g = at::Tensor();
}

void Reducer::on_grad_ready(size_t i) {
  std::lock_guard<std::mutex> lk(mu_);
  if (i >= params_.size()) throw Error("DDP: gradient hook for unknown parameter index");
  if (filled_[i]) {
    // A parameter used twice in one graph fires once per use; take the last. ZeRO-2 dropped .grad
    // after the first use, so a later one is added while its bucket has not left yet.
    at::Tensor& g = params_[i].mutable_grad();
    size_t b = plan_.bucket_of[i];
    if (opts_.shard_gradients && g.defined() && b >= next_launch_ && slots_[i].defined()) {
      slots_[i].add_(g, scale_);
      g = at::Tensor();
    }
    return;
  }
  if (opts_.shard_gradients)
    take_grad_locked(i);
  else
    bind_grad_locked(i);
  if (scale_ != 1.0) slots_[i].mul_(scale_);
  filled_[i] = 1;
  any_ready_ = true;
  --pending_[plan_.bucket_of[i]];
  launch_ready_locked();
}

void Reducer::launch_ready_locked() {
  while (next_launch_ < plan_.buckets.size() && pending_[next_launch_] == 0) {
    size_t b = next_launch_++;
    if (opts_.zero) {
      if (comm_.size() == 1) {  // a world of one owns the whole bucket
        grad_blocks_[b].copy_(buffers_[b]);
        if (opts_.shard_gradients) release_bucket_locked(b);
        continue;
      }
      if (cast_) comm_bufs_[b].copy_(buffers_[b]);
      const at::Tensor& in = cast_ ? comm_bufs_[b] : buffers_[b];
      launched_bytes_ += static_cast<int64_t>(in.nbytes());
      works_.push_back(comm_.reduce_scatter(in, cast_ ? comm_blocks_[b] : grad_blocks_[b], ReduceOp::kSum,
                                            "zero.grad_bucket[" + std::to_string(b) + "]"));
      work_bucket_.push_back(b);
      if (opts_.shard_gradients && cast_) release_bucket_locked(b, /*keep_comm_copy=*/true);  // the cast copy travels
      continue;
    }
    if (comm_.size() == 1) continue;  // a world of one has nothing to reduce
    if (cast_) comm_bufs_[b].copy_(buffers_[b]);
    const at::Tensor& t = cast_ ? comm_bufs_[b] : buffers_[b];
    launched_bytes_ += static_cast<int64_t>(t.nbytes());
    works_.push_back(comm_.allreduce(t, ReduceOp::kSum, "ddp.bucket[" + std::to_string(b) + "]"));
    work_bucket_.push_back(b);
  }
  if (opts_.shard_gradients) release_done_locked();
}

void Reducer::finalize() {
  std::unique_lock<std::mutex> lk(mu_);
  std::vector<std::string> unused;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!filled_[i]) unused.push_back(names_[i]);
  if (!unused.empty() && !opts_.find_unused_parameters) {
    // Complete what was launched (matched on every rank that launched it), then report.
    auto works = works_;
    lk.unlock();
    for (auto& w : works) w->wait();
    reset();
    std::string list;
    for (auto& n : unused) list += (list.empty() ? "" : ", ") + n;
    throw Error("DDP: " + std::to_string(unused.size()) + " parameter(s) received no gradient in this step: " + list +
                ". If parts of the model are unused by design, construct DDP with "
                "find_unused_parameters=true (missing gradients then count as zeros)");
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (filled_[i]) continue;
    if (opts_.shard_gradients) {
      ensure_bucket_locked(plan_.bucket_of[i]);  // a fresh buffer is zeros
      params_[i].mutable_grad() = at::Tensor();
    } else {
      slots_[i].zero_();
      params_[i].mutable_grad() = slots_[i];
    }
    filled_[i] = 1;
    --pending_[plan_.bucket_of[i]];
  }
  launch_ready_locked();
  auto works = works_;
  const int64_t launched = launched_bytes_;
  lk.unlock();
  auto t0 = std::chrono::steady_clock::now();
  {
    TraceSpan blocked("comm_blocked", "wait");  // the training thread waits for the buckets
    for (auto& w : works) w->wait();
  }
  stats_.finalize_wait_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (cast_)  // reduced in comm_dtype: back into the gradients
    for (size_t b = 0; b < plan_.buckets.size(); ++b)
      (opts_.zero ? grad_blocks_[b] : buffers_[b]).copy_(opts_.zero ? comm_blocks_[b] : comm_bufs_[b]);
  stats_.buckets = static_cast<int>(plan_.buckets.size());
  stats_.bytes_reduced = launched;
  lk.lock();
  stats_.peak_grad_bytes = std::max(peak_held_, held_bytes_locked());
  lk.unlock();
  if (!opts_.shard_gradients)  // re-bind any .grad a user replaced meanwhile (cheap pointer checks)
    for (size_t i = 0; i < params_.size(); ++i)
      if (!params_[i].grad().is_same(slots_[i])) params_[i].mutable_grad() = slots_[i];
  reset();  // ZeRO-2: releases every bucket buffer
}

int64_t Reducer::held_bytes_locked() const {
  int64_t n = grad_shard_.defined() ? static_cast<int64_t>(grad_shard_.nbytes()) : 0;
  for (const auto& t : buffers_)
    if (t.defined()) n += static_cast<int64_t>(t.nbytes());
  for (const auto& t : comm_bufs_)
    if (t.defined()) n += static_cast<int64_t>(t.nbytes());
  for (const auto& t : comm_blocks_) n += static_cast<int64_t>(t.nbytes());
  return n;
}

int64_t Reducer::held_grad_bytes() const {
  std::lock_guard<std::mutex> lk(mu_);
  int64_t n = held_bytes_locked();
  if (opts_.shard_gradients)  // gradients autograd made that no hook has taken yet (no_sync)
    for (const auto& p : params_)
      if (p.grad().defined()) n += static_cast<int64_t>(p.grad().nbytes());
  return n;
}

at::ScalarType Reducer::wire_dtype() const { return cast_ ? opts_.comm_dtype : grad_dtype_; }

int64_t Reducer::bytes_per_step() const {
  if (comm_.size() == 1) return 0;
  int64_t n = 0;
  const int64_t elem = static_cast<int64_t>(c10::elementSize(wire_dtype()));
  for (int64_t numel : bucket_numel_) n += numel * elem;
  return n;
}

namespace {
std::string dtype_name(at::ScalarType s) {
  switch (s) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    default: return c10::toString(s);
  }
}
}  // namespace

std::string Reducer::wire_dtype_name() const { return buffers_.empty() ? "none" : dtype_name(wire_dtype()); }

std::string Reducer::describe_comm() const {
  const std::string wire = wire_dtype_name();
  std::string s = "gradient communication: " + wire;
  if (cast_) s += " (" + dtype_name(grad_dtype_) + " gradients cast per bucket, the average rounded to " + wire + ")";
  return s + ", " + std::to_string(buffers_.size()) + " bucket(s), " + std::to_string(bytes_per_step()) +
         " bytes per step";
}

void Reducer::zero_grad() {
  std::lock_guard<std::mutex> lk(mu_);
  if (opts_.shard_gradients) {  // ZeRO-2: nothing full-size survives a step
    for (auto& p : params_) p.mutable_grad() = at::Tensor();
    return;
  }
  for (auto& b : buffers_) b.zero_();
  for (size_t i = 0; i < params_.size(); ++i) params_[i].mutable_grad() = slots_[i];
}

}  // namespace hpctrain
