// Shared by the SyncBatchNorm unit and MPI tests: the single-process reference (torch's own
// BatchNorm module) and a relative-difference measure.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/any.h>

#include <memory>

#include "ddp/sync_batchnorm.h"

namespace hpctrain::testing {

// max|a - b| / max|b| (0 when both are empty); the tests' "max relative difference".
inline double max_rel_diff(const at::Tensor& a, const at::Tensor& b) {
  if (b.numel() == 0) return a.numel() == 0 ? 0.0 : 1e30;
  at::Tensor ad = a.to(at::kDouble), bd = b.to(at::kDouble);
  double scale = std::max(bd.abs().max().item<double>(), 1e-12);
  return (ad - bd).abs().max().item<double>() / scale;
}

// torch::nn::BatchNorm{1,2,3}d for an input of rank `input_dim`, behind one handle.
struct ReferenceBN {
  std::shared_ptr<torch::nn::Module> module;
  torch::nn::AnyModule any;

  ReferenceBN(int64_t input_dim, const torch::nn::BatchNormOptions& o) {
    if (input_dim <= 3)
      any = torch::nn::AnyModule(torch::nn::BatchNorm1d(o));
    else if (input_dim == 4)
      any = torch::nn::AnyModule(torch::nn::BatchNorm2d(o));
    else
      any = torch::nn::AnyModule(torch::nn::BatchNorm3d(o));
    module = any.ptr();
  }
  at::Tensor forward(const at::Tensor& x) { return any.forward(x); }
  at::Tensor param(const char* n) const {
    auto* t = module->named_parameters(false).find(n);
    return t ? *t : at::Tensor();
  }
  at::Tensor buffer(const char* n) const {
    auto* t = module->named_buffers(false).find(n);
    return t ? *t : at::Tensor();
  }
};

// Gives the reference and the SyncBatchNorm the same random affine parameters.
inline void randomize_affine(ReferenceBN& ref, SyncBatchNormImpl& s) {
  if (!s.options.affine()) return;
  at::NoGradGuard no_grad;
  s.weight.copy_(at::rand({s.options.num_features()}) + 0.5);
  s.bias.copy_(at::randn({s.options.num_features()}));
  ref.param("weight").copy_(s.weight);
  ref.param("bias").copy_(s.bias);
}

}  // namespace hpctrain::testing
