#include "res_gn_net.h"

#include <ATen/ATen.h>

namespace nn = torch::nn;

ResGnNetImpl::ResGnNetImpl(int64_t in, int64_t classes, int64_t w) {
  stem = register_module("stem", nn::Conv2d(nn::Conv2dOptions(in, w, 3).padding(1)));
  gn0 = register_module("gn0", nn::GroupNorm(4, w));
  conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(w, w, 3).padding(1).bias(false)));
  gn1 = register_module("gn1", nn::GroupNorm(4, w));
  conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(w, w, 3).padding(1).bias(false)));
  gn2 = register_module("gn2", nn::GroupNorm(4, w));
  down = register_module("down", nn::Conv2d(nn::Conv2dOptions(w, 2 * w, 3).stride(2).padding(1)));
  head = register_module("head", nn::Linear(2 * w, classes));
}

at::Tensor ResGnNetImpl::forward(const at::Tensor& x) {
  at::Tensor h = at::relu(gn0->forward(stem->forward(x)));
  at::Tensor r = at::relu(gn1->forward(conv1->forward(h)));
  h = at::relu(h + gn2->forward(conv2->forward(r)));  // the residual connection
  h = at::relu(down->forward(h));
  return head->forward(h.mean({2, 3}));  // global average pool
}
