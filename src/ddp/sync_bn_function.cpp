// SyncBatchNorm's autograd Function. Sums are taken in fp64 with ordinary tensor ops (there is
// no CPU kernel for at::batch_norm_stats), so the variance E[x^2] - E[x]^2 keeps fp32 accuracy
// for |mean| / std up to ~1e5; elementwise work runs in the input's dtype (fp32 for half/bf16).
#include "ddp/sync_bn_function.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <sstream>

#include "runtime/check.h"

namespace hpctrain {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::Variable;
using torch::autograd::variable_list;

// The dims every statistic reduces over: all but the channel dim 1.
std::vector<int64_t> reduce_dims(int64_t dim) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < dim; ++d) dims.push_back(d);
  return dims;
}

// [C] -> [1, C, 1, ...] so it broadcasts against an input of rank `dim`.
at::Tensor per_channel(const at::Tensor& t, int64_t dim) {
  std::vector<int64_t> shape(dim, 1);
  shape[1] = t.numel();
  return t.reshape(shape);
}

// The dtype elementwise work runs in: half and bfloat16 are computed in fp32, as torch does.
at::ScalarType compute_type(const at::Tensor& x) {
  auto t = x.scalar_type();
  return (t == at::kHalf || t == at::kBFloat16) ? at::kFloat : t;
}

Communicator* comm_from(const c10::IValue& v) {
  return reinterpret_cast<Communicator*>(static_cast<intptr_t>(v.toInt()));
}

class SyncBatchNormFunction : public torch::autograd::Function<SyncBatchNormFunction> {
 public:
  static Variable forward(AutogradContext* ctx, const Variable& x, const Variable& weight,
                          const Variable& bias, double eps, int64_t C, Communicator* comm,
                          std::string tag, SyncBnStats* stats, bool x_ok, std::string why) {
    auto f64 = x.options().dtype(at::kDouble);
    // Layout: [sum(C), sumsq(C), count, ranks with bad input, sum of their ranks].
    at::Tensor buf = at::zeros({2 * C + 3}, f64);
    if (x_ok) {
      at::Tensor xd = x.to(at::kDouble);
      auto dims = reduce_dims(x.dim());
      buf.narrow(0, 0, C).copy_(xd.sum(dims));
      buf.narrow(0, C, C).copy_((xd * xd).sum(dims));
      buf[2 * C].fill_(static_cast<double>(x.numel() / C));
    } else {
      buf[2 * C + 1].fill_(1.0);
      buf[2 * C + 2].fill_(static_cast<double>(comm->rank()));
    }
    comm->allreduce(buf, ReduceOp::kSum, tag)->wait();

    at::Tensor host = buf.narrow(0, 2 * C, 3).cpu();
    auto* h = host.data_ptr<double>();
    if (h[1] > 0) {
      std::ostringstream os;
      os << tag << ": ";
      if (!x_ok) os << "rank " << comm->rank() << ": " << why;
      else if (h[1] == 1) os << "rank " << static_cast<int64_t>(h[2]) << " gave an invalid input";
      else os << static_cast<int64_t>(h[1]) << " ranks gave invalid inputs";
      throw Error(os.str());
    }
    const auto count = static_cast<int64_t>(h[0]);
    if (count < 2)
      throw Error(tag + ": expected more than 1 value per channel over all ranks in training, got " +
                  std::to_string(count) + " (input shape on rank " +
                  std::to_string(comm->rank()) + ": " + c10::str(x.sizes()) + ")");

    at::Tensor mean = buf.narrow(0, 0, C) / static_cast<double>(count);
    at::Tensor var = (buf.narrow(0, C, C) / static_cast<double>(count) - mean * mean).clamp_min(0);
    at::Tensor invstd = (var + eps).rsqrt();
    if (stats) *stats = SyncBnStats{mean, var, count};

    ctx->save_for_backward({x, weight, mean, invstd});
    ctx->saved_data["count"] = count;
    ctx->saved_data["comm"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(comm));
    ctx->saved_data["tag"] = tag;

    auto ct = compute_type(x);
    int64_t d = x.dim();
    at::Tensor scale = invstd, shift = -mean * invstd;  // xhat = x * scale + shift
    if (weight.defined()) {
      scale = scale * weight.to(at::kDouble);
      shift = shift * weight.to(at::kDouble) + bias.to(at::kDouble);
    }
    at::Tensor out = x.to(ct) * per_channel(scale.to(ct), d) + per_channel(shift.to(ct), d);
    return out.to(x.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &mean = saved[2], &invstd = saved[3];
    const auto count = ctx->saved_data["count"].toInt();
    Communicator* comm = comm_from(ctx->saved_data["comm"]);
    const std::string tag = ctx->saved_data["tag"].toStringRef();
    const int64_t C = mean.numel(), d = x.dim();

    // An unused output gets an undefined gradient; it still must join the collective.
    at::Tensor g = grad_out[0].defined() ? grad_out[0] : at::zeros_like(x);
    auto dims = reduce_dims(d);
    at::Tensor xhat = (x.to(at::kDouble) - per_channel(mean, d)) * per_channel(invstd, d);
    at::Tensor gd = g.to(at::kDouble);
    at::Tensor sums = at::cat({gd.sum(dims), (gd * xhat).sum(dims)});  // [sum_dy, sum_dy_xhat]

    variable_list grads(10);
    if (weight.defined()) {
      if (ctx->needs_input_grad(1)) grads[1] = sums.narrow(0, C, C).to(weight.scalar_type());
      if (ctx->needs_input_grad(2)) grads[2] = sums.narrow(0, 0, C).to(weight.scalar_type());
    }
    if (ctx->needs_input_grad(0)) {
      // Summed (not averaged) over ranks and divided by the global count: see the header.
      at::Tensor global = sums.clone();
      comm->allreduce(global, ReduceOp::kSum, tag + ".backward")->wait();
      global.div_(static_cast<double>(count));
      at::Tensor scale = weight.defined() ? invstd * weight.to(at::kDouble) : invstd;
      auto ct = compute_type(x);
      at::Tensor gi = (g.to(ct) - per_channel(global.narrow(0, 0, C).to(ct), d) -
                       xhat.to(ct) * per_channel(global.narrow(0, C, C).to(ct), d)) *
                      per_channel(scale.to(ct), d);
      grads[0] = gi.to(x.scalar_type());
    }
    return grads;
  }
};

}  // namespace

at::Tensor sync_batch_norm_train(const at::Tensor& x, const at::Tensor& weight,
                                 const at::Tensor& bias, double eps, int64_t num_features,
                                 Communicator& comm, const std::string& tag, SyncBnStats* stats,
                                 bool x_ok, const std::string& why) {
  // Custom autograd Functions cannot take undefined tensors as inputs (autograd records each
  // input's device): without affine parameters, pass a constant scale of 1 and shift of 0,
  // which leave the result bit-identical and need no gradient.
  if (!weight.defined()) {
    auto opts = x.options().dtype(at::kFloat).requires_grad(false);
    return SyncBatchNormFunction::apply(x, at::ones({num_features}, opts), at::zeros({num_features}, opts),
                                        eps, num_features, &comm, tag, stats, x_ok, why);
  }
  return SyncBatchNormFunction::apply(x, weight, bias, eps, num_features, &comm, tag, stats, x_ok,
                                      why);
}

}  // namespace hpctrain
