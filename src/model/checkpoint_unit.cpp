// Activation checkpointing as a custom autograd function: forward without autograd keeping the
// unit's input, RNG and autocast state; backward replays them, recomputes the unit with grad and
// hands back the gradients of the input and of the unit's parameters.
#include "model/checkpoint_unit.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/Generator.h>
#include <ATen/core/grad_mode.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>

namespace hpctrain {
namespace {

std::atomic<int64_t> g_units{0}, g_nanos{0};

struct AutocastState {
  bool enabled = false;
  at::ScalarType dtype = at::kBFloat16;
};
constexpr c10::DeviceType kAutocastTypes[2] = {c10::DeviceType::CPU, c10::DeviceType::CUDA};

// Everything the recompute needs besides the saved input.
struct UnitCall : torch::CustomClassHolder {
  UnitFn unit;
  std::vector<at::Tensor> params;  // the unit's parameters that require grad, in input order
  bool x_grad = false;             // whether the unit's input needs a gradient
  std::optional<at::Generator> device_gen;
  at::Tensor cpu_rng, device_rng;
  AutocastState autocast[2];
};

at::Tensor get_state(at::Generator& g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state();
}
void set_state(at::Generator& g, const at::Tensor& s) {
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(s);
}

// The generators as the unit's forward found them, for the scope's lifetime; then back to where
// the run's stream is now.
class RngReplay {
 public:
  explicit RngReplay(UnitCall& c) : c_(c), cpu_(at::globalContext().defaultGenerator(c10::kCPU)) {
    now_cpu_ = get_state(cpu_);
    set_state(cpu_, c_.cpu_rng);
    if (c_.device_gen) {
      now_device_ = get_state(*c_.device_gen);
      set_state(*c_.device_gen, c_.device_rng);
    }
  }
  ~RngReplay() {
    set_state(cpu_, now_cpu_);
    if (c_.device_gen) set_state(*c_.device_gen, now_device_);
  }

 private:
  UnitCall& c_;
  at::Generator cpu_;
  at::Tensor now_cpu_, now_device_;
};

// The autocast state of the unit's forward, for the scope's lifetime (backward runs outside the
// trainer's autocast scope). Casts cached inside are dropped on the way out, as AutocastScope does.
class AutocastReplay {
 public:
  explicit AutocastReplay(const UnitCall& c) {
    for (int i = 0; i < 2; ++i) {
      prev_[i] = {at::autocast::is_autocast_enabled(kAutocastTypes[i]),
                  at::autocast::get_autocast_dtype(kAutocastTypes[i])};
      at::autocast::set_autocast_enabled(kAutocastTypes[i], c.autocast[i].enabled);
      at::autocast::set_autocast_dtype(kAutocastTypes[i], c.autocast[i].dtype);
    }
    at::autocast::increment_nesting();
  }
  ~AutocastReplay() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    for (int i = 0; i < 2; ++i) {
      at::autocast::set_autocast_enabled(kAutocastTypes[i], prev_[i].enabled);
      at::autocast::set_autocast_dtype(kAutocastTypes[i], prev_[i].dtype);
    }
  }

 private:
  AutocastState prev_[2];
};

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::TensorList& params,
                            const c10::intrusive_ptr<UnitCall>& call) {
    (void)params;  // inputs of the node (their edges); the recompute reads them through call->params
    at::Generator cpu = at::globalContext().defaultGenerator(c10::kCPU);
    call->cpu_rng = get_state(cpu);
    if (x.is_cuda()) {
      call->device_gen.emplace(at::globalContext().defaultGenerator(x.device()));
      call->device_rng = get_state(*call->device_gen);
    }
    for (int i = 0; i < 2; ++i)
      call->autocast[i] = {at::autocast::is_autocast_enabled(kAutocastTypes[i]),
                           at::autocast::get_autocast_dtype(kAutocastTypes[i])};
    ctx->save_for_backward({x});
    ctx->saved_data["call"] = c10::IValue::make_capsule(c10::intrusive_ptr<torch::CustomClassHolder>(call));
    at::NoGradGuard no_grad;
    return call->unit(x);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto call = c10::static_intrusive_pointer_cast<UnitCall>(ctx->saved_data["call"].toCapsule());
    const at::Tensor x = ctx->get_saved_variables()[0];
    torch::autograd::variable_list out(call->params.size() + 2);  // x, params..., the call (no gradient)
    if (!grads[0].defined()) return out;
    at::Tensor xd = x.detach().requires_grad_(call->x_grad);
    at::Tensor y;
    {
      RngReplay rng(*call);
      AutocastReplay autocast(*call);
      at::AutoGradMode grad_on(true);
      const auto t0 = std::chrono::steady_clock::now();
      y = call->unit(xd);
      g_nanos += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
      g_units += 1;
    }
    if (!y.requires_grad()) return out;
    std::vector<at::Tensor> inputs;
    if (call->x_grad) inputs.push_back(xd);
    inputs.insert(inputs.end(), call->params.begin(), call->params.end());
    at::AutoGradMode grad_on(true);
    torch::autograd::variable_list g = torch::autograd::grad({y}, inputs, {grads[0]}, /*retain_graph=*/false,
                                                            /*create_graph=*/false, /*allow_unused=*/true);
    size_t k = 0;
    if (call->x_grad) out[0] = g[k++];
    for (size_t i = 0; i < call->params.size(); ++i) out[1 + i] = g[k++];
    return out;
  }
};

}  // namespace

at::Tensor checkpoint_unit(UnitFn unit, const at::Tensor& x, const std::vector<at::Tensor>& params) {
  auto call = c10::make_intrusive<UnitCall>();
  for (const at::Tensor& p : params)
    if (p.requires_grad()) call->params.push_back(p);
  call->x_grad = x.requires_grad();
  if (!at::GradMode::is_enabled() || (!call->x_grad && call->params.empty())) return unit(x);
  call->unit = std::move(unit);
  return CheckpointFunction::apply(x, at::TensorList(call->params), call);
}

RecomputeTotals recompute_totals() { return {g_units.load(), double(g_nanos.load()) * 1e-9}; }

}  // namespace hpctrain
