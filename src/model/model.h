// The model interface: what the trainer, DDP, SyncBN conversion, checkpoints and eval see of a
// model. The zoo (mlp/cnn/resnet), plugin factories (--model-lib) and user programs
// (hpctrain::train with a factory) all sit behind it.
//
// Contract:
// - forward(x): x is a batch [B, sample_shape...] on the run's device; returns one tensor whose
//   first dimension is B (classification: [B, num_classes] logits).
// - named_parameters() / named_buffers(): the model's state, named by its own state_dict names
//   (no prefix), in a fixed order that is the same on every rank for the same model. These very
//   tensors are trained, reduced, checkpointed and restored (no copies). Parameters that do
//   not require grad are checkpointed but not trained.
// - Shared parameters (tied weights: a GPT's output head that is its token embedding, a module
//   that registers one tensor under two names) are ONE parameter, as in PyTorch: named_parameters()
//   lists each tensor once, under the first name the module gives it, and tied_names() lists
//   each other name with the name it is listed under (PyTorch's state_dict() has both). DDP,
//   ZeRO, optimizers, weight decay, clipping and the parameter count see the tensor once;
//   checkpoints store it once and record the other names; `ckpt merge` writes every name.
//   ModuleModel and TorchScript models do this themselves; untie_names() wraps any other Model.
// - train(on) / is_training(): training vs evaluation behaviour (BatchNorm, Dropout).
// - to(device): moves every parameter and buffer to `device`. The trainer calls it once after
//   construction, then checks that every parameter and buffer is on the run's device.
// - module(): the torch::nn::Module tree behind the model when there is one (SyncBN conversion
//   walks it); null otherwise.
// - set_activation_checkpointing(on) (optional, --activation-checkpointing): a model whose
//   forward falls into units (a transformer block) runs each unit through checkpoint_unit
//   (model/checkpoint_unit.h, whose contract a unit must meet: no buffer updates, no collectives,
//   its parameters passed along) while `on`, and returns how many units it has. The default
//   returns 0: the model has no units, and the trainer refuses the flag in one line naming it.
// - set_unit_runner(run) (optional, --zero 3): a model whose forward falls into units calls
//   run(i, fn, x) instead of fn(x) for unit i (fn: the unit's forward; run may gather the unit's
//   parameters around it) while `run` is set, and returns per unit its name and the names of its
//   parameters as named_parameters() lists them (disjoint). The default returns none: the
//   whole model is one unit.
// - init_parameter(name, out) / set_parameter(name, value) (optional, --zero 3 set-up without the
//   whole model on one rank): a factory that honours ModelSpec::meta_parameters builds its trained
//   parameters on the meta device (shapes, no memory). init_parameter writes parameter `name`'s
//   initial values into `out` (a CPU float tensor of its shape), drawing from the global generator;
//   called once per parameter in named_parameters() order after the same seed, the values equal
//   the model's own CPU build. set_parameter makes `value` (CPU, the parameter's shape, requires
//   grad) the parameter `name` from then on (named_parameters() and forward use it). The
//   defaults throw: a model that never returns meta parameters needs neither.
// The model/ stage among the others, its threads and locks: docs/architecture.md.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/named_tensors.h"

namespace torch::nn {
class Module;
}

namespace hpctrain {

class Communicator;

// --zero 3: runs unit `unit`'s forward `fn` on `x` (Model::set_unit_runner).
using UnitRunner = std::function<at::Tensor(size_t unit, const std::function<at::Tensor(const at::Tensor&)>& fn,
                                            const at::Tensor& x)>;
struct ModelUnit {
  std::string name;                 // "transformer.h.3"
  std::vector<std::string> params;  // its parameters' names, as named_parameters() lists them
};

class Model {
 public:
  virtual ~Model() = default;
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  virtual NamedTensors named_parameters() = 0;
  virtual NamedTensors named_buffers() = 0;
  virtual void train(bool on) = 0;
  virtual bool is_training() const = 0;
  virtual void to(c10::Device device) = 0;
  virtual std::shared_ptr<torch::nn::Module> module() { return nullptr; }
  // Optional: a short description for the run's config line (size, FLOPs, ...); "" for none.
  virtual std::string describe() { return ""; }
  // Optional: training FLOPs (forward + backward) per token of a language model, for MFU
  // (train/mfu.h); 0 when unknown.
  virtual double train_flops_per_token() { return 0; }
  // Optional: whether --weight-decay applies to parameter `name` (default: every parameter;
  // language models leave out biases, norms and position tables).
  virtual bool decays(const std::string& name, const at::Tensor& param) { return true; }
  // The other names of shared parameters: (alias, the name named_parameters() lists it under),
  // in the module's order. Empty for a model without tied weights.
  virtual std::vector<std::pair<std::string, std::string>> tied_names() { return {}; }
  // Optional: recompute units in backward (see the contract); the number of units, 0 for none.
  virtual int64_t set_activation_checkpointing(bool on) { return 0; }
  // Optional: route each unit's forward through `run` (see the contract); the units.
  virtual std::vector<ModelUnit> set_unit_runner(UnitRunner run) { return {}; }
  // Optional: a meta-built model's initial values, one parameter at a time (see the contract).
  virtual void init_parameter(const std::string& name, at::Tensor& out);
  virtual void set_parameter(const std::string& name, const at::Tensor& value);
};
using ModelPtr = std::shared_ptr<Model>;

// `m` itself when its named_parameters() lists every tensor once; otherwise a Model that
// forwards to `m` and lists each shared tensor once (tied_names() gives the others). The
// registry and the trainer pass every model they build through it.
ModelPtr untie_names(ModelPtr m);

// Every name of the model's state as PyTorch's state_dict() lists it: each parameter under
// every name (tied names too, the same tensor), then the buffers. What checkpoint loading
// matches a saved state against (ckpt/checkpoint.h load_model_state).
NamedTensors state_dict_names(Model& m);

// What a model factory is told about the run.
struct ModelSpec {
  std::string name;                   // the model name asked for (--model)
  std::vector<int64_t> sample_shape;  // per-sample input shape, e.g. [1, 28, 28]
  int64_t num_classes = 0;            // classification targets: the number of classes (0: regression)
  std::vector<int64_t> target_shape;  // regression: per-sample target shape (output [B, target_shape...])
  // With --sync-bn: the communicator to build SyncBatchNorm layers with (pass it to
  // hpctrain::make_batch_norm, ddp/sync_batchnorm.h); null otherwise. BatchNorm layers held in
  // a Sequential/ModuleList/ModuleDict are converted by the trainer anyway.
  Communicator* sync_bn = nullptr;
  c10::Device device{c10::kCPU};  // the run's device (the trainer moves the model there)
  // Token data (language models): input int64 [B, seq_len], output logits [B, seq_len, vocab_size];
  // vocab_size also in num_classes, seq_len in sample_shape. 0 for other data.
  int64_t vocab_size = 0;
  int64_t seq_len = 0;
  // --model-config "k=v,k=v" (TOML model_config), for the model to interpret (parse_model_config).
  std::string model_config;
  // Asked by a --zero 3 set-up: build the trained parameters on the meta device when the model can
  // (it then implements Model::init_parameter and set_parameter); a factory may ignore it and
  // build as usual (the set-up then shards the whole model).
  bool meta_parameters = false;
};

// "n_layer=4,n_head=4" -> {{"n_layer","4"},{"n_head","4"}}; a part without '=' or a key given
// twice throws CollectiveError naming it.
std::map<std::string, std::string> parse_model_config(const std::string& text);

// Builds a fresh model for `spec`. Called once per rank, with the same spec on every rank;
// it must build the same architecture everywhere (DDP checks names, dtypes and shapes). The
// initial values need not agree: DDP broadcasts rank 0's. Throw hpctrain::CollectiveError for
// a spec the model cannot serve (a one-line message naming why).
using ModelFactory = std::function<ModelPtr(const ModelSpec&)>;

// One model the run can build: a zoo or plugin factory (model/model_registry.h) or a
// TorchScript file (model/torchscript_model.h). Both produce entries; neither includes the other.
struct ModelEntry {
  std::string name;
  std::string description;
  std::string origin;  // "zoo", a plugin's path, "torchscript", or "program" (a factory in code)
  ModelFactory factory;
  std::string archive;  // origin "torchscript": the module's file bytes, stored in checkpoints
};

// A torch::nn::Module with a one-tensor forward, behind the interface.
class ModuleModel : public Model {
 public:
  using ForwardFn = std::function<at::Tensor(const at::Tensor&)>;
  ModuleModel(std::shared_ptr<torch::nn::Module> module, ForwardFn forward);
  at::Tensor forward(const at::Tensor& x) override { return forward_(x); }
  NamedTensors named_parameters() override;  // shared tensors once (split_tied)
  NamedTensors named_buffers() override;
  std::vector<std::pair<std::string, std::string>> tied_names() override;
  void train(bool on) override;
  bool is_training() const override;
  void to(c10::Device device) override;
  std::shared_ptr<torch::nn::Module> module() override { return module_; }

 private:
  std::shared_ptr<torch::nn::Module> module_;
  ForwardFn forward_;
};

// module_model(std::make_shared<MyNetImpl>(...)) or module_model(MyNet(...)) (a TORCH_MODULE
// holder): any module whose forward takes one tensor and returns one.
template <class M>
ModelPtr module_model(std::shared_ptr<M> m) {
  M* raw = m.get();
  return std::make_shared<ModuleModel>(std::move(m), [raw](const at::Tensor& x) { return raw->forward(x); });
}
template <class Holder, class = decltype(std::declval<Holder>().ptr())>
ModelPtr module_model(Holder h) {
  return module_model(h.ptr());
}

// The number of trained and frozen parameter elements, each shared tensor counted once.
int64_t count_parameters(Model& m);

}  // namespace hpctrain
