// Small models for DDP tests: an MLP and a CNN without BatchNorm.
#pragma once

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

namespace hpctrain::testing {

struct TinyMlpImpl : torch::nn::Module {
  TinyMlpImpl(int in = 20, int hidden = 32, int out = 5, bool with_unused = false) {
    fc1 = register_module("fc1", torch::nn::Linear(in, hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, out));
    if (with_unused) unused = register_module("unused", torch::nn::Linear(hidden, out));
  }
  at::Tensor forward(at::Tensor x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, unused{nullptr};
};
TORCH_MODULE(TinyMlp);

struct TinyCnnImpl : torch::nn::Module {
  TinyCnnImpl() {
    c1 = register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3).padding(1)));
    c2 = register_module("c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 8, 3).padding(1)));
    fc = register_module("fc", torch::nn::Linear(8 * 4 * 4, 5));
  }
  at::Tensor forward(at::Tensor x) {
    x = torch::max_pool2d(torch::relu(c1(x)), 2);
    x = torch::max_pool2d(torch::relu(c2(x)), 2);
    return fc(x.flatten(1));
  }
  torch::nn::Conv2d c1{nullptr}, c2{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(TinyCnn);

// Max over parameters of max|a-b| / max(max|b|, 1e-12).
inline double max_rel_diff(torch::nn::Module& a, torch::nn::Module& b) {
  auto pa = a.named_parameters(true);
  auto pb = b.named_parameters(true);
  double worst = 0;
  for (auto& item : pa) {
    at::Tensor x = item.value().detach(), y = pb[item.key()].detach();
    double denom = std::max(y.abs().max().item<double>(), 1e-12);
    worst = std::max(worst, (x - y).abs().max().item<double>() / denom);
  }
  return worst;
}

}  // namespace hpctrain::testing
