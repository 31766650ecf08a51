// Two models for `hpctrain train --model-lib libmynets.so --model NAME`:
// - tiny_vgg: conv-BN-ReLU blocks held in a Sequential, so `--sync-bn` converts its BatchNorm
//   layers to SyncBatchNorm by itself (same state names, so checkpoints load either way);
// - gelu_mlp: a 3-layer perceptron with GELU and LayerNorm.
// Each factory gets the data's sample shape and class count (hpctrain::ModelSpec).
#include <hpctrain/model/model_registry.h>
#include <hpctrain/runtime/check.h>

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>

namespace nn = torch::nn;

namespace {

hpctrain::ModelPtr tiny_vgg(const hpctrain::ModelSpec& s) {
  if (s.sample_shape.size() != 3 || s.sample_shape[1] < 4 || s.sample_shape[2] < 4)
    throw hpctrain::CollectiveError("tiny_vgg needs [C,H,W] images of at least 4x4");
  const int64_t c = s.sample_shape[0], h = s.sample_shape[1] / 4, w = s.sample_shape[2] / 4;
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(c, 16, 3).padding(1)), nn::BatchNorm2d(16), nn::ReLU(),
                     nn::MaxPool2d(2), nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1)), nn::BatchNorm2d(32),
                     nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(), nn::Linear(32 * h * w, 64), nn::ReLU(),
                     nn::Linear(64, s.num_classes));
  return hpctrain::module_model(net);
}

hpctrain::ModelPtr gelu_mlp(const hpctrain::ModelSpec& s) {
  int64_t in = 1;
  for (int64_t d : s.sample_shape) in *= d;
  nn::Sequential net(nn::Flatten(), nn::Linear(in, 128), nn::LayerNorm(nn::LayerNormOptions({128})), nn::GELU(),
                     nn::Linear(128, 64), nn::GELU(), nn::Linear(64, s.num_classes));
  return hpctrain::module_model(net);
}

}  // namespace

HPCTRAIN_REGISTER_MODEL("tiny_vgg", "two conv-BN-ReLU-pool blocks and two linear layers", tiny_vgg);
HPCTRAIN_REGISTER_MODEL("gelu_mlp", "perceptron with LayerNorm and GELU", gelu_mlp);
