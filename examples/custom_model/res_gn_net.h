// ResGnNet: a small conv net with GroupNorm and one residual block. Not in hpctrain's zoo, and
// free of Dropout and BatchNorm, so N ranks x batch B train exactly like 1 rank x batch N*B.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

struct ResGnNetImpl : torch::nn::Module {
  ResGnNetImpl(int64_t in_channels, int64_t classes, int64_t width = 16);
  at::Tensor forward(const at::Tensor& x);

  torch::nn::Conv2d stem{nullptr}, conv1{nullptr}, conv2{nullptr}, down{nullptr};
  torch::nn::GroupNorm gn0{nullptr}, gn1{nullptr}, gn2{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(ResGnNet);
