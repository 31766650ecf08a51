// The model zoo: mlp, cnn, resnet. Parameter names are stable because they are checkpoint keys.
//
// Contract:
// - Every model is a ClassifierNet with two Sequentials, `features` and `classifier`, so
//   tensor names read "features.0.weight", "classifier.2.bias", ...
// - `cnn` is exactly DESIGN.md's network: conv(C->32,3x3,p1)-BN-ReLU-maxpool2-conv(32->64,3x3,p1)-
//   BN-ReLU-maxpool2-flatten-linear(64*(H/4)*(W/4)->256)-ReLU-linear(256->classes); 824,650
//   parameters for 1x28x28 and 10 classes.
// - `mlp`: flatten-(sample numel)->512-ReLU-512->256-ReLU-256->classes, no BN; any sample shape.
// - Behind the model interface (the registry's zoo entries), a regression spec (num_classes 0)
//   gets one output per target entry, shaped [B, target_shape...].
// - `resnet`: a small pre-activation ResNet (stem conv 3x3 to 48, three stages of one
//   pre-activation basic block each at 48/96/192 channels, strides 1/2/2, BN-ReLU,
//   global average pool, linear), for 28x28 or 32x32 inputs; 690,394 parameters for 1x28x28
//   and 10 classes.
// - Behind the model interface, `features` and `classifier` are the model's units (--zero 3).
// - Normalization layers come from a NormFactory, so SyncBatchNorm can replace BatchNorm2d at
//   construction with identical names and state (weight, bias, running_mean, running_var,
//   num_batches_tracked).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace hpctrain {

using NormFactory = std::function<torch::nn::AnyModule(int64_t channels)>;
NormFactory batchnorm2d_factory();

struct ClassifierNetImpl : torch::nn::Module {
  ClassifierNetImpl(torch::nn::Sequential features, torch::nn::Sequential classifier);
  at::Tensor forward(at::Tensor x);
  torch::nn::Sequential features{nullptr}, classifier{nullptr};
  // --zero 3 (Model::set_unit_runner): `features` is unit 0, `classifier` unit 1.
  std::function<at::Tensor(size_t, const std::function<at::Tensor(const at::Tensor&)>&, const at::Tensor&)> runner;
};
TORCH_MODULE(ClassifierNet);

// `sample_shape` is [C, H, W] (any shape for mlp); `num_classes` the number of outputs (>= 1).
// Throws CollectiveError for an unknown name or unusable shape.
ClassifierNet make_model(const std::string& name, const std::vector<int64_t>& sample_shape, int64_t num_classes,
                         const NormFactory& norm = batchnorm2d_factory());

int64_t count_parameters(torch::nn::Module& m);

}  // namespace hpctrain
