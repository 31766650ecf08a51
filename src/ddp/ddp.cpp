// DistributedDataParallel: parameter lists compared through allgather_strings, state broadcast
// from rank 0, and a post-hook on each parameter's AccumulateGrad feeding the Reducer. Under
// ZeRO-1 the parameters become views of padded flat bucket buffers (set_data).
#include "ddp/ddp.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/node.h>
#include <torch/csrc/autograd/variable.h>

#include <chrono>
#include <cstring>

#include "comm/small_collectives.h"
#include "runtime/check.h"
#include "runtime/clock.h"
#include "runtime/tensor_text.h"

namespace hpctrain {
namespace {

// Runs after AccumulateGrad has added this step's gradient into .grad (so under no_sync it sees
// the running sum), which is the point where a gradient is final for this backward.
class GradReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  GradReadyHook(DistributedDataParallel* ddp, size_t index) : ddp_(ddp), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    if (ddp_->sync_enabled()) ddp_->reducer().on_grad_ready(index_);
    return outputs;
  }

 private:
  DistributedDataParallel* ddp_;
  size_t index_;
};

}  // namespace

namespace {
NamedTensors module_params(torch::nn::Module& m) {
  NamedTensors out;
  for (auto& item : m.named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  return out;
}
NamedTensors module_buffers(torch::nn::Module& m) {
  NamedTensors out;
  for (auto& item : m.named_buffers(/*recurse=*/true))
    if (item.value().defined()) out.emplace_back(item.key(), item.value());
  return out;
}
}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, Communicator& comm,
                                                 DdpOptions opts)
    : DistributedDataParallel(module_params(*module), module_buffers(*module), comm, opts) {}

DistributedDataParallel::DistributedDataParallel(NamedTensors params, NamedTensors buffers, Communicator& comm,
                                                 DdpOptions opts)
    : comm_(comm), opts_(opts) {
  if (opts_.bucket_cap_mb <= 0) throw CollectiveError("DDP: bucket cap must be > 0 MiB");
  // A tensor listed under two names (tied weights) is one parameter: broadcast and reduced once.
  for (auto& [name, p] : split_tied(params).unique) {
    all_params_.push_back(p);
    if (!p.requires_grad()) continue;
    names_.push_back(name);
    params_.push_back(p);
  }
  for (auto& [name, b] : buffers)
    if (b.defined()) buffers_.push_back(b);
  check_same_parameters();
  broadcast_state();
  std::vector<ParamSpec> specs;
  for (size_t i = 0; i < params_.size(); ++i)
    specs.push_back({names_[i], params_[i].numel(), static_cast<int64_t>(params_[i].element_size()),
                     c10::toString(params_[i].scalar_type()), params_[i].device().str()});
  auto cap = static_cast<int64_t>(opts_.bucket_cap_mb * 1048576.0);
  auto first = static_cast<int64_t>(opts_.first_bucket_mb * 1048576.0);
  BucketPlan plan = make_bucket_plan(specs, cap, first);
  ReducerOptions ro{opts_.find_unused_parameters};
  ro.comm_dtype = opts_.grad_comm_dtype;
  if (opts_.shard_gradients && !opts_.zero) throw CollectiveError("DDP: shard_gradients (ZeRO-2) needs zero");
  ro.shard_gradients = opts_.shard_gradients;
  if (opts_.zero) {
    for (const auto& sp : specs)
      if (sp.dtype != specs[0].dtype)
        throw CollectiveError("--zero " + std::to_string(opts_.shard_gradients ? 2 : 1) +
                              " needs every trained parameter in one dtype; " + sp.name + " is " + sp.dtype + ", " +
                              specs[0].name + " " + specs[0].dtype);
    zero_ = std::make_unique<ZeroPartition>(make_zero_partition(plan, specs, comm_.size()));
    ro.zero = zero_.get();
  }
  reducer_ = std::make_unique<Reducer>(params_, names_, std::move(plan), comm_, ro);
  if (zero_) flatten_parameters();
  install_hooks();
}

DistributedDataParallel::~DistributedDataParallel() = default;

// Every rank serializes "name dtype shape" per parameter; all ranks gather all lists and reach
// the same verdict, so the error is raised identically everywhere (no rank left waiting).
void DistributedDataParallel::check_same_parameters() {
  std::string mine;
  for (size_t i = 0; i < params_.size(); ++i)
    mine += names_[i] + " " + c10::toString(params_[i].scalar_type()) + " " + shape_string(params_[i].sizes()) + "\n";
  // Always over the CPU backend: this is metadata.
  std::vector<std::string> all = allgather_strings(comm_, mine, "ddp.check_parameters");
  auto lines = [](const std::string& s) {
    std::vector<std::string> out;
    size_t p = 0;
    while (p < s.size()) {
      size_t e = s.find('\n', p);
      out.push_back(s.substr(p, e - p));
      p = e + 1;
    }
    return out;
  };
  auto ref = lines(all[0]);
  for (size_t r = 1; r < all.size(); ++r) {
    auto other = lines(all[r]);
    for (size_t i = 0; i < std::max(ref.size(), other.size()); ++i) {
      std::string a = i < ref.size() ? ref[i] : "(none)";
      std::string b = i < other.size() ? other[i] : "(none)";
      if (a != b)
        throw CollectiveError("DDP: models differ between ranks: parameter #" + std::to_string(i) + " is \"" + b +
                              "\" on rank " + std::to_string(r) + " but \"" + a + "\" on rank 0");
    }
  }
}

void DistributedDataParallel::broadcast_state() {
  at::NoGradGuard no_grad;
  std::vector<WorkHandle> works;
  for (auto& p : all_params_) works.push_back(comm_.broadcast(p.data(), 0, "ddp.init_params"));
  for (auto& b : buffers_) works.push_back(comm_.broadcast(b, 0, "ddp.init_buffers"));
  for (auto& w : works) w->wait();
}

void DistributedDataParallel::install_hooks() {
  for (size_t i = 0; i < params_.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(params_[i]);
    acc->add_post_hook(std::make_unique<GradReadyHook>(this, i));
    accumulators_.push_back(std::move(acc));
  }
}

// Each parameter's values move into its bucket's padded flat buffer and the parameter becomes a
// view of it (set_data keeps the variable, its autograd identity and every module's reference).
void DistributedDataParallel::flatten_parameters() {
  at::NoGradGuard no_grad;
  const BucketPlan& plan = reducer_->plan();
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const Bucket& bk = plan.buckets[b];
    const at::Tensor& first = params_[bk.params.front()];
    at::Tensor buf = at::zeros({zero_->buckets[b].padded}, first.options().requires_grad(false));
    for (size_t s = 0; s < bk.params.size(); ++s) {
      at::Tensor& p = params_[bk.params[s]];
      at::Tensor view = buf.narrow(0, bk.offsets[s], p.numel()).view(p.sizes());
      view.copy_(p.detach());
      p.set_data(view);
    }
    param_buffers_.push_back(buf);
  }
}

const ZeroPartition& DistributedDataParallel::zero_partition() const {
  if (!zero_) throw Error("DDP: not in ZeRO mode");
  return *zero_;
}

int64_t DistributedDataParallel::held_param_bytes() const {
  int64_t n = 0;
  for (const auto& b : param_buffers_) n += static_cast<int64_t>(b.nbytes());
  for (const auto& p : all_params_)  // under ZeRO the trained ones are counted in their buckets
    if (!zero_ || !p.requires_grad()) n += static_cast<int64_t>(p.nbytes());
  return n;
}

std::vector<at::Tensor> DistributedDataParallel::param_blocks() const {
  std::vector<at::Tensor> out;
  if (!zero_) return out;
  for (size_t b = 0; b < param_buffers_.size(); ++b) {
    int64_t block = zero_->buckets[b].block;
    out.push_back(param_buffers_[b].narrow(0, comm_.rank() * block, block));
  }
  return out;
}

void DistributedDataParallel::allgather_params() {
  if (!zero_ || comm_.size() == 1) return;
  auto blocks = param_blocks();
  std::vector<WorkHandle> works;
  for (size_t b = 0; b < blocks.size(); ++b)
    works.push_back(comm_.allgather_into(blocks[b], param_buffers_[b], "zero.param_bucket[" + std::to_string(b) + "]"));
  for (auto& w : works) w->wait();
}

void DistributedDataParallel::prepare_forward() {
  if (!opts_.broadcast_buffers || comm_.size() == 1) return;
  std::vector<WorkHandle> works;
  for (auto& b : buffers_) works.push_back(comm_.broadcast(b, 0, "ddp.buffers"));
  for (auto& w : works) w->wait();
}

void DistributedDataParallel::backward(const at::Tensor& loss) {
  auto t0 = std::chrono::steady_clock::now();
  try {
    loss.backward();
  } catch (...) {
    reducer_->reset();
    throw;
  }
  if (sync_enabled_) finalize();
  stats_.backward_s = seconds_since(t0);
}

void DistributedDataParallel::finalize() {
  reducer_->finalize();
  const auto& rs = reducer_->last_stats();
  stats_.finalize_wait_s = rs.finalize_wait_s;
  stats_.bytes_reduced = rs.bytes_reduced;
  stats_.buckets = rs.buckets;
}

void DistributedDataParallel::zero_grad() { reducer_->zero_grad(); }

}  // namespace hpctrain
