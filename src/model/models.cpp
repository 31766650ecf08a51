// The zoo: mlp, cnn and resnet as ClassifierNet (and gpt, model/gpt.h)(features, classifier), registered by name. The
// factory uses SyncBatchNorm when the spec carries a communicator, and for regression reshapes
// the output to the target shape.
#include "model/models.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include "ddp/sync_batchnorm.h"
#include "model/gpt.h"
#include "model/model_registry.h"
#include "runtime/check.h"

namespace hpctrain {
namespace nn = torch::nn;

NormFactory batchnorm2d_factory() {
  return [](int64_t c) { return nn::AnyModule(nn::BatchNorm2d(c)); };
}

ClassifierNetImpl::ClassifierNetImpl(nn::Sequential f, nn::Sequential c) {
  features = register_module("features", std::move(f));
  classifier = register_module("classifier", std::move(c));
}

at::Tensor ClassifierNetImpl::forward(at::Tensor x) {
  if (!runner) return classifier->forward(features->forward(x));
  at::Tensor h = runner(0, [this](const at::Tensor& in) { return features->forward(in); }, x);
  return runner(1, [this](const at::Tensor& in) { return classifier->forward(in); }, h);
}

namespace {

nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride = 1) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

// Pre-activation basic block (He et al. 2016): BN-ReLU-conv-BN-ReLU-conv plus shortcut; the
// shortcut is a strided 1x1 conv when the shape changes.
struct PreActBlockImpl : nn::Module {
  PreActBlockImpl(int64_t in, int64_t out, int64_t stride, const NormFactory& norm) {
    // Norm layers are registered under stable names and called through their AnyModule.
    bn1 = norm(in);
    register_module("bn1", bn1.ptr());
    conv1 = register_module("conv1", conv3x3(in, out, stride));
    bn2 = norm(out);
    register_module("bn2", bn2.ptr());
    conv2 = register_module("conv2", conv3x3(out, out));
    if (stride != 1 || in != out)
      shortcut = register_module("shortcut", nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)));
  }
  at::Tensor forward(at::Tensor x) {
    at::Tensor pre = at::relu(bn1.forward(x));
    at::Tensor skip = shortcut ? shortcut->forward(pre) : x;
    at::Tensor y = conv1->forward(pre);
    y = conv2->forward(at::relu(bn2.forward(y)));
    return y + skip;
  }
  nn::AnyModule bn1, bn2;
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, shortcut{nullptr};
};
TORCH_MODULE(PreActBlock);

struct GlobalAvgPoolImpl : nn::Module {
  at::Tensor forward(at::Tensor x) { return x.mean({2, 3}); }
};
TORCH_MODULE(GlobalAvgPool);

ClassifierNet make_mlp(const std::vector<int64_t>& shape, int64_t classes) {
  int64_t in = 1;
  for (int64_t d : shape) in *= d;
  nn::Sequential features(nn::Flatten(), nn::Linear(in, 512), nn::ReLU(), nn::Linear(512, 256), nn::ReLU());
  return ClassifierNet(features, nn::Sequential(nn::Linear(256, classes)));
}

ClassifierNet make_cnn(const std::vector<int64_t>& shape, int64_t classes, const NormFactory& norm) {
  nn::Sequential features;
  features->push_back(nn::Conv2d(nn::Conv2dOptions(shape[0], 32, 3).padding(1)));
  features->push_back(norm(32));
  features->push_back(nn::ReLU());
  features->push_back(nn::MaxPool2d(2));
  features->push_back(nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)));
  features->push_back(norm(64));
  features->push_back(nn::ReLU());
  features->push_back(nn::MaxPool2d(2));
  features->push_back(nn::Flatten());
  int64_t flat = 64 * (shape[1] / 4) * (shape[2] / 4);
  nn::Sequential classifier(nn::Linear(flat, 256), nn::ReLU(), nn::Linear(256, classes));
  return ClassifierNet(features, classifier);
}

ClassifierNet make_resnet(const std::vector<int64_t>& shape, int64_t classes, const NormFactory& norm) {
  // 48/96/192 channels: the 32/64/128 version (307,690 parameters) plateaued at 0.938 on
  // Fashion-MNIST; this width costs 1.9x the compute (perf/README.md, "Fashion-MNIST training").
  nn::Sequential features;
  features->push_back(conv3x3(shape[0], 48));
  features->push_back(PreActBlock(48, 48, 1, norm));
  features->push_back(PreActBlock(48, 96, 2, norm));
  features->push_back(PreActBlock(96, 192, 2, norm));
  features->push_back(norm(192));
  features->push_back(nn::ReLU());
  features->push_back(GlobalAvgPool());
  return ClassifierNet(features, nn::Sequential(nn::Linear(192, classes)));
}

}  // namespace

ClassifierNet make_model(const std::string& name, const std::vector<int64_t>& shape, int64_t num_classes,
                         const NormFactory& norm) {
  if (num_classes < 1) throw CollectiveError("model " + name + " needs at least one output");
  if (name == "mlp") return make_mlp(shape, num_classes);
  if (shape.size() != 3)
    throw CollectiveError("model " + name + " needs [C,H,W] samples, the data has " + std::to_string(shape.size()) +
                          " sample dimension(s)");
  if ((name == "cnn" || name == "resnet") && (shape[1] < 4 || shape[2] < 4))
    throw CollectiveError("model " + name + " needs images of at least 4x4");
  if (name == "cnn") return make_cnn(shape, num_classes, norm);
  if (name == "resnet") return make_resnet(shape, num_classes, norm);
  throw CollectiveError("unknown model \"" + name + "\" (allowed: mlp, cnn, resnet)");
}

namespace {

// A zoo model behind the interface, with its two Sequentials as units.
class ZooModel final : public ModuleModel {
 public:
  ZooModel(ClassifierNet net, ForwardFn forward) : ModuleModel(net.ptr(), std::move(forward)), net_(net.get()) {}
  std::vector<ModelUnit> set_unit_runner(UnitRunner run) override {
    net_->runner = std::move(run);
    std::vector<ModelUnit> units{{"features", {}}, {"classifier", {}}};
    for (auto& [name, p] : named_parameters())
      for (auto& u : units)
        if (name.rfind(u.name + ".", 0) == 0) u.params.push_back(name);
    return units;
  }

 private:
  ClassifierNetImpl* net_;  // owned by the ModuleModel
};

ModelPtr zoo_model(ClassifierNet net) {
  ClassifierNetImpl* raw = net.get();
  return std::make_shared<ZooModel>(net, [raw](const at::Tensor& x) { return raw->forward(x); });
}

// The zoo behind the model interface: BatchNorm layers become SyncBatchNorm (tags bn0, bn1, ...)
// when the spec carries a communicator.
ModelFactory zoo_factory() {
  return [](const ModelSpec& spec) -> ModelPtr {
    if (spec.vocab_size > 0)
      throw CollectiveError("model " + spec.name +
                            " takes images or float tensors; this data is a token stream: train a language model "
                            "(--model gpt, a TorchScript module or a plugin taking int64 [B,T])");
    NormFactory norm = batchnorm2d_factory();
    if (spec.sync_bn) {
      auto counter = std::make_shared<int>(0);
      Communicator* c = spec.sync_bn;
      norm = [c, counter](int64_t ch) {
        return make_batch_norm(2, nn::BatchNormOptions(ch), c, "bn" + std::to_string((*counter)++));
      };
    }
    if (spec.num_classes > 0) {
      if (spec.num_classes < 2) throw CollectiveError("the data has fewer than 2 classes");
      return zoo_model(make_model(spec.name, spec.sample_shape, spec.num_classes, norm));
    }
    // Regression: one output per target entry, shaped like the targets.
    int64_t outputs = 1;
    for (int64_t d : spec.target_shape) outputs *= d;
    ClassifierNet net = make_model(spec.name, spec.sample_shape, outputs, norm);
    std::vector<int64_t> tshape = spec.target_shape;
    return std::make_shared<ZooModel>(net, [raw = net.get(), tshape](const at::Tensor& x) {
      std::vector<int64_t> shape{x.size(0)};
      shape.insert(shape.end(), tshape.begin(), tshape.end());
      return raw->forward(x).view(shape);
    });
  };
}

HPCTRAIN_REGISTER_MODEL("mlp", "784-512-256-classes perceptron with ReLU, no BatchNorm", zoo_factory());
HPCTRAIN_REGISTER_MODEL("cnn", "two conv-BN-ReLU-maxpool blocks and two linear layers (824,650 parameters on 1x28x28)",
                        zoo_factory());
HPCTRAIN_REGISTER_MODEL("resnet", "pre-activation ResNet, 48/96/192 channels (690,394 parameters on 1x28x28)",
                        zoo_factory());
HPCTRAIN_REGISTER_MODEL("gpt",
                        "GPT-2 layout language model for token data (--seq-len T, --model-config "
                        "n_layer=4,n_head=4,n_embd=128,dropout=0,bias=true)",
                        [](const ModelSpec& spec) { return make_gpt(gpt_options(spec), spec.meta_parameters); });

}  // namespace

int64_t count_parameters(nn::Module& m) {
  int64_t n = 0;
  for (auto& p : m.parameters(true)) n += p.numel();
  return n;
}

}  // namespace hpctrain
