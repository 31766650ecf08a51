// SyncBatchNorm's autograd Function: ATen's fused batch-norm kernels for every pass over the
// activation (there is no CPU kernel for at::batch_norm_stats, but batch_norm_update_stats and
// the eval-mode kernels exist on every device), fp64 only for the per-channel combination
// across ranks. Elementwise work runs in the input's dtype (fp32 for half/bf16).
#include "ddp/sync_bn_function.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <sstream>

#include "comm/blocking.h"
#include "runtime/check.h"

namespace hpctrain {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::Variable;
using torch::autograd::variable_list;

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

// Statistics of the global batch from every rank's local (count, mean, biased var) row, with
// Chan et al.'s pairwise formula in fp64: var = sum n_r (v_r + (m_r - M)^2) / N, which does not
// cancel the way E[x^2] - E[x]^2 does when |mean| >> std. Every rank combines the same rows in
// the same order, so all ranks get bitwise-identical statistics.
struct GlobalStats {
  at::Tensor mean, var;  // [C] fp64
  int64_t count = 0;
  int64_t bad_ranks = 0, first_bad = -1;
};

// Row layout: [mean(C), var(C), count, bad].
GlobalStats combine(const std::vector<at::Tensor>& rows, int64_t C) {
  GlobalStats g;
  g.mean = at::zeros({C}, rows[0].options());
  g.var = at::zeros({C}, rows[0].options());
  for (size_t r = 0; r < rows.size(); ++r) {
    const double* h = rows[r].data_ptr<double>();
    if (h[2 * C + 1] > 0) {
      if (g.first_bad < 0) g.first_bad = static_cast<int64_t>(r);
      ++g.bad_ranks;
    }
    const auto n = static_cast<int64_t>(h[2 * C]);
    g.count += n;
    if (n > 0) g.mean.add_(rows[r].narrow(0, 0, C), static_cast<double>(n));
  }
  if (g.count == 0) return g;
  g.mean.div_(static_cast<double>(g.count));
  for (const auto& row : rows) {
    const double n = row.data_ptr<double>()[2 * C];
    if (n > 0) g.var.add_(row.narrow(0, C, C) + (row.narrow(0, 0, C) - g.mean).square(), n);
  }
  g.var.div_(static_cast<double>(g.count));
  return g;
}

class SyncBatchNormFunction : public torch::autograd::Function<SyncBatchNormFunction> {
 public:
  // Every pass over the activation is one of ATen's fused, vectorized CPU/CUDA kernels: local
  // statistics (batch_norm_update_stats), the normalization (batch_norm in eval mode with the
  // global statistics), and in backward the per-channel sums (native_batch_norm_backward in
  // eval mode) plus two in-place multiply-adds.
  static Variable forward(AutogradContext* ctx, const Variable& x, const Variable& weight, const Variable& bias,
                          double eps, int64_t C, Communicator* comm, std::string tag, SyncBnStats* stats, bool x_ok,
                          std::string why) {
    auto ct = compute_type(x);
    at::Tensor xc = x_ok ? x.to(ct) : x;
    at::Tensor row = at::zeros({2 * C + 2}, x.options().dtype(at::kDouble));
    if (x_ok && xc.numel() > 0) {
      auto [m, v] = at::batch_norm_update_stats(xc, {}, {}, 0.0);
      row.narrow(0, 0, C).copy_(m);
      row.narrow(0, C, C).copy_(v);
      row[2 * C].fill_(static_cast<double>(x.numel() / C));
    } else if (!x_ok) {
      row[2 * C + 1].fill_(1.0);
    }
    std::vector<at::Tensor> rows;
    allgather_now(*comm, row, &rows, tag);
    for (auto& r : rows) r = r.cpu().contiguous();
    GlobalStats g = combine(rows, C);

    if (g.bad_ranks > 0) {
      std::ostringstream os;
      os << tag << ": ";
      if (!x_ok)
        os << "rank " << comm->rank() << ": " << why;
      else if (g.bad_ranks == 1)
        os << "rank " << g.first_bad << " gave an invalid input";
      else
        os << g.bad_ranks << " ranks gave invalid inputs";
      throw Error(os.str());
    }
    if (g.count < 2)
      throw Error(tag + ": expected more than 1 value per channel over all ranks in training, got " +
                  std::to_string(g.count) + " (input shape on rank " + std::to_string(comm->rank()) + ": " +
                  c10::str(x.sizes()) + ")");

    at::Tensor mean = g.mean.to(x.device()), var = g.var.to(x.device());
    at::Tensor invstd = (var + eps).rsqrt();
    if (stats) *stats = SyncBnStats{mean, var, g.count};

    ctx->save_for_backward({x, weight, mean, invstd, var});
    ctx->saved_data["count"] = g.count;
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["comm"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(comm));
    ctx->saved_data["tag"] = tag;

    at::Tensor out = at::batch_norm(xc, weight.to(ct), bias.to(ct), mean.to(ct), var.to(ct),
                                    /*training=*/false, 0.0, eps, /*cudnn_enabled=*/true);
    return out.to(x.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &mean = saved[2], &invstd = saved[3], &var = saved[4];
    const auto count = ctx->saved_data["count"].toInt();
    const double eps = ctx->saved_data["eps"].toDouble();
    Communicator* comm = comm_from(ctx->saved_data["comm"]);
    const std::string tag = ctx->saved_data["tag"].toStringRef();
    const int64_t C = mean.numel(), d = x.dim();
    auto ct = compute_type(x);

    // An unused output gets an undefined gradient; it still must join the collective.
    at::Tensor xc = x.to(ct);
    at::Tensor g = grad_out[0].defined() ? grad_out[0].to(ct) : at::zeros_like(xc);
    at::Tensor sum_dy_xhat, sum_dy;
    if (x.numel() > 0) {
      // Eval mode normalizes with the given (global) statistics: grad_weight = sum dy * xhat,
      // grad_bias = sum dy, both local.
      auto r = at::native_batch_norm_backward(g, xc, weight.to(ct), mean.to(ct), var.to(ct), {}, {},
                                              /*train=*/false, eps, {false, true, true});
      sum_dy_xhat = std::get<1>(r).to(at::kDouble);
      sum_dy = std::get<2>(r).to(at::kDouble);
    } else {
      sum_dy_xhat = at::zeros({C}, mean.options());
      sum_dy = at::zeros({C}, mean.options());
    }

    variable_list grads(10);
    if (weight.defined()) {
      if (ctx->needs_input_grad(1)) grads[1] = sum_dy_xhat.to(weight.scalar_type());
      if (ctx->needs_input_grad(2)) grads[2] = sum_dy.to(weight.scalar_type());
    }
    if (ctx->needs_input_grad(0)) {
      // Summed (not averaged) over ranks and divided by the global count: see the header.
      at::Tensor global = at::cat({sum_dy, sum_dy_xhat});
      allreduce_now(*comm, global, ReduceOp::kSum, tag + ".backward");
      global.div_(static_cast<double>(count));
      const at::Tensor mean_dy = global.narrow(0, 0, C), mean_dy_xhat = global.narrow(0, C, C);
      // dx = (dy - mean_dy - xhat * mean_dy_xhat) * w * invstd
      //    = dy * a + (x - mean) * b + c, with per-channel a, b, c (fp64, then the compute type).
      at::Tensor a = weight.defined() ? invstd * weight.to(at::kDouble) : invstd;
      at::Tensor b = -a * invstd * mean_dy_xhat;
      at::Tensor c = -a * mean_dy;
      at::Tensor gi = at::sub(xc, per_channel(mean.to(ct), d));
      gi.mul_(per_channel(b.to(ct), d)).add_(per_channel(c.to(ct), d));
      gi.addcmul_(g, per_channel(a.to(ct), d));
      grads[0] = gi.to(x.scalar_type());
    }
    return grads;
  }
};

}  // namespace

at::Tensor sync_batch_norm_train(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps,
                                 int64_t num_features, Communicator& comm, const std::string& tag, SyncBnStats* stats,
                                 bool x_ok, const std::string& why) {
  // Custom autograd Functions cannot take undefined tensors as inputs (autograd records each
  // input's device): without affine parameters, pass a constant scale of 1 and shift of 0,
  // which leave the result bit-identical and need no gradient.
  if (!weight.defined()) {
    auto opts = x.options().dtype(at::kFloat).requires_grad(false);
    return SyncBatchNormFunction::apply(x, at::ones({num_features}, opts), at::zeros({num_features}, opts), eps,
                                        num_features, &comm, tag, stats, x_ok, why);
  }
  return SyncBatchNormFunction::apply(x, weight, bias, eps, num_features, &comm, tag, stats, x_ok, why);
}

}  // namespace hpctrain
