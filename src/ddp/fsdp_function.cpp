// FsdpEngine's autograd side: a unit as a custom autograd function (forward gathers, runs the
// unit with autograd inside and releases; backward gathers again, prefetches the previous unit,
// differentiates the kept graph and reduce-scatters the parameters' gradient), the root's
// end-of-backward callback, and the first forward's unit-order agreement.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/engine.h>

#include "comm/blocking.h"
#include "comm/guard/op_guard.h"
#include "ddp/fsdp.h"
#include "ddp/fsdp_unit.h"
#include "runtime/check.h"

namespace hpctrain {

void queue_backward_callback(std::function<void()> fn) {
  torch::autograd::Engine::get_default_engine().queue_callback(std::move(fn));
}

namespace {

// A unit with bf16 matrices (FsdpOptions::param_dtype) computes under CPU autocast in that dtype
// when its caller has no autocast on (a forward outside the trainer's scope, e.g. the output
// check): an fp32 input never meets a bf16 weight in an op autocast does not cast.
class UnitAutocast {
 public:
  UnitAutocast(bool lowp, at::ScalarType dtype) : on_(lowp && !at::autocast::is_autocast_enabled(at::kCPU)) {
    if (!on_) return;
    prev_ = at::autocast::get_autocast_dtype(at::kCPU);
    at::autocast::set_autocast_enabled(at::kCPU, true);
    at::autocast::set_autocast_dtype(at::kCPU, dtype);
    at::autocast::increment_nesting();
  }
  ~UnitAutocast() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(at::kCPU, false);
    at::autocast::set_autocast_dtype(at::kCPU, prev_);
  }
  UnitAutocast(const UnitAutocast&) = delete;
  UnitAutocast& operator=(const UnitAutocast&) = delete;

 private:
  bool on_;
  at::ScalarType prev_ = at::kBFloat16;
};

struct UnitCall : torch::CustomClassHolder {
  FsdpEngine* engine = nullptr;
  size_t unit = 0;
  bool lowp = false;
  at::ScalarType dtype = at::kBFloat16;
  std::function<at::Tensor(const at::Tensor&)> fn;
  bool x_grad = false;
  at::Tensor xd, y;  // the unit's own graph, from its input to its output
};

struct UnitFunction : torch::autograd::Function<UnitFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::TensorList& params,
                            const c10::intrusive_ptr<UnitCall>& call) {
    (void)params;  // edges to the parameters, so the node runs even when x needs no gradient
    FsdpEngine& e = *call->engine;
    e.gather(call->unit);
    e.prefetch(e.neighbour(call->unit, 1));
    {
      at::AutoGradMode grad_on(true);
      UnitAutocast autocast(call->lowp, call->dtype);
      call->xd = x.detach().requires_grad_(call->x_grad);
      call->y = call->fn(call->xd);
    }
    e.release(call->unit);  // the graph's saved views of the parameters wait for backward's gather
    ctx->saved_data["call"] = c10::IValue::make_capsule(c10::intrusive_ptr<torch::CustomClassHolder>(call));
    return call->y.detach();
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto call = c10::static_intrusive_pointer_cast<UnitCall>(ctx->saved_data["call"].toCapsule());
    FsdpEngine& e = *call->engine;
    const size_t u = call->unit;
    std::vector<at::Tensor> params = e.unit_params(u);
    torch::autograd::variable_list out(params.size() + 2);
    e.queue_finalize();
    e.note_backward(u);
    std::vector<at::Tensor> pgrads(params.size());
    if (grads[0].defined() && call->y.requires_grad()) {
      e.gather(u);
      e.prefetch(e.neighbour(u, -1));
      std::vector<at::Tensor> inputs;
      if (call->x_grad) inputs.push_back(call->xd);
      for (auto& p : params) inputs.push_back(p);
      torch::autograd::variable_list g;
      {
        at::AutoGradMode grad_on(true);
        g = torch::autograd::grad({call->y}, inputs, {grads[0]}, /*retain_graph=*/false, /*create_graph=*/false,
                                  /*allow_unused=*/true);
      }
      size_t k = 0;
      if (call->x_grad) out[0] = g[k++];
      for (size_t i = 0; i < params.size(); ++i) pgrads[i] = g[k++];
    }
    call->y = at::Tensor();
    call->xd = at::Tensor();
    e.release(u);
    e.reduce_grads(u, pgrads);
    return out;
  }
};

}  // namespace

at::Tensor FsdpEngine::run_unit(size_t u, const std::function<at::Tensor(const at::Tensor&)>& fn,
                                const at::Tensor& x) {
  if (u + 1 >= units_.size()) throw Error("--zero 3: unit index " + std::to_string(u) + " out of range");
  std::vector<at::Tensor> params = unit_params(u);
  bool any_grad = x.requires_grad();
  for (auto& p : params) any_grad = any_grad || p.requires_grad();
  if (!at::GradMode::is_enabled() || !any_grad) {
    note_ran(u, false);
    gather(u);
    prefetch(neighbour(u, 1));
    at::Tensor y;
    {
      UnitAutocast autocast(units_[u]->lowp, opts_.param_dtype);
      y = fn(x);
    }
    release(u);
    return y;
  }
  note_ran(u, true);
  auto call = c10::make_intrusive<UnitCall>();
  call->engine = this;
  call->unit = u;
  call->lowp = units_[u]->lowp;
  call->dtype = opts_.param_dtype;
  call->fn = fn;
  call->x_grad = x.requires_grad();
  return UnitFunction::apply(x, at::TensorList(params), call);
}

// The first forward: before each unit (and at its end) every rank says which unit it is at, so
// a rank that takes another path fails on every rank at the first difference, before any
// gather of different units could pair up.
void FsdpEngine::agree_first(size_t u) {
  if (order_known_ || comm_.size() == 1) return;
  at::Tensor mine = at::full({1}, u == std::string::npos ? int64_t{-1} : static_cast<int64_t>(u), at::kLong);
  std::vector<at::Tensor> all;
  allgather_now(comm_, mine, &all, "fsdp.first_order");
  auto name = [&](int64_t v) { return v < 0 ? std::string("no further unit") : "unit " + units_.at(v)->name; };
  const int64_t first = all.at(0).item<int64_t>();
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r].item<int64_t>() != first)
      throw CollectiveError("--zero 3: in the first forward rank " + std::to_string(r) + " ran " +
                            name(all[r].item<int64_t>()) + " where rank 0 ran " + name(first) +
                            "; every rank must run every unit, in one order");
}

void FsdpEngine::note_ran(size_t u, bool with_grad) {
  agree_first(u);
  if (order_known_) {
    const size_t k = ran_.size();
    if (k >= order_.size() || order_[k] != u)
      throw Error("--zero 3: at step " + std::to_string(current_step()) + " unit " + units_[u]->name +
                  " ran out of the order of the first forward (expected " +
                  (k < order_.size() ? units_[order_[k]]->name : std::string("no further unit")) +
                  "); every rank must run every unit, in one order");
  }
  ran_.push_back(u);
  if (with_grad) awaiting_.push_back(u);
}

void FsdpEngine::note_backward(size_t u) {
  for (size_t k = 0; k < awaiting_.size(); ++k)
    if (awaiting_[k] == u) {
      awaiting_.erase(awaiting_.begin() + static_cast<std::ptrdiff_t>(k));
      return;
    }
}

at::Tensor FsdpEngine::end_forward(const at::Tensor& out) {
  if (!order_known_)
    check_first_order();
  else if (ran_.size() != order_.size())
    throw Error("--zero 3: at step " + std::to_string(current_step()) + " the forward ran " +
                std::to_string(ran_.size()) + " unit(s), the first ran " +
                std::to_string(order_.size()) + "; unit " +
                units_[order_[std::min(ran_.size(), order_.size() - 1)]]->name + " is missing");
  if (at::GradMode::is_enabled() && out.requires_grad() && out.grad_fn()) {
    out.register_hook([this](const at::Tensor& g) {
      queue_finalize();
      return g;
    });
    return out;
  }
  release(units_.size() - 1);
  root_open_ = false;
  return out;
}

}  // namespace hpctrain
