// Trainer::State's model side: the model behind the interface (registry, plugin or program
// factory, TorchScript), SyncBN conversion, the device check, and the output check at set-up.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/manifest.h"
#include "ddp/ddp.h"
#include "ddp/sync_batchnorm.h"
#include "model/model_registry.h"
#include "runtime/agree.h"
#include "runtime/check.h"
#include "runtime/tensor_text.h"
#include "train/init_from.h"
#include "train/trainer_state_impl.h"

namespace hpctrain {

namespace {

// Where the checkpoint that --resume would pick got its model ("zoo", a plugin's path,
// "program"), or "" when there is none or it cannot be read. For error messages only.
std::string resume_model_origin(const TrainConfig& cfg) {
  try {
    // The same choice, verified, as the resume itself makes (ckpt/checkpoint.h).
    std::optional<std::string> dir = find_resume(cfg.ckpt_dir, cfg.resume);
    return dir ? ckpt::read_manifest(*dir).meta.value("model_origin", std::string()) : "";
  } catch (const std::exception&) {
    return "";
  }
}

// The one-line reason of a LibTorch error: TorchScript's interpreter puts a serialized-code
// traceback first and "RuntimeError: <reason>" last.
std::string last_line(const std::string& what) {
  size_t end = what.find_last_not_of(" \n");
  if (end == std::string::npos) return what;
  size_t start = what.rfind('\n', end);
  std::string line =
      what.substr(start == std::string::npos ? 0 : start + 1, end + 1 - (start == std::string::npos ? 0 : start + 1));
  if (line.rfind("RuntimeError: ", 0) == 0) line = line.substr(14);
  return line;
}

// Tied weights are one tensor under two names (listed once, model/model.h). Two different
// parameter tensors over overlapping memory would get two gradients and two updates of it: a
// wrong result, so refuse them in one line naming both.
void check_no_shared_memory(const std::string& model, const NamedTensors& params) {
  std::map<const char*, std::pair<const char*, std::string>> spans;  // start -> (end, name)
  for (const auto& [name, p] : params) {
    if (p.numel() == 0 || p.is_meta()) continue;  // meta: no memory yet (a --zero 3 set-up)
    const char* a = static_cast<const char*>(p.data_ptr());
    int64_t last = 0;  // the element farthest from the first (strides of a parameter are >= 0)
    for (int64_t d = 0; d < p.dim(); ++d) last += (p.size(d) - 1) * p.stride(d);
    const char* e = a + p.element_size() * (last + 1);
    auto next = spans.lower_bound(a);
    auto clash = next != spans.end() && next->first < e ? next : spans.end();
    if (clash == spans.end() && next != spans.begin() && std::prev(next)->second.first > a) clash = std::prev(next);
    if (clash != spans.end())
      throw CollectiveError("model " + model + ": parameters " + clash->second.second + " and " + name +
                            " are different tensors over the same memory; tie weights by registering the same "
                            "tensor under both names (PyTorch: `self.head.weight = self.wte.weight`)");
    spans.emplace(a, std::make_pair(e, name));
  }
}

}  // namespace

// The model behind the interface, on the run's device, with SyncBN when asked. Collective:
// every rank builds the same model and reaches the same verdict on it.
void Trainer::State::build_model() {
  agree_on_failure(world.mpi_comm(), [&] {
    if (!model_entry.factory) {
      try {
        model_entry = resolve_model(cfg.model, cfg.model_lib);
      } catch (const CollectiveError& e) {
        std::string origin = cfg.ckpt_dir.empty() && cfg.resume == "auto" ? "" : resume_model_origin(cfg);
        if (origin.empty() || origin == "zoo" || origin == "program") throw;
        throw CollectiveError(std::string(e.what()) +
                              "; the checkpoint to resume was trained with it from the plugin " + origin +
                              ": pass --model-lib " + origin);
      }
    } else if (model_entry.origin.empty())
      model_entry.origin = "program";
    cfg.model_config = init_model_config(cfg);  // a Hugging Face --init-from may supply it
    const auto& info = train->info();
    ModelSpec spec;
    spec.name = cfg.model;
    spec.sample_shape = info.sample_shape;
    spec.num_classes = info.num_classes;
    spec.target_shape = info.target_shape;
    spec.sync_bn = cfg.sync_bn ? comm.get() : nullptr;
    spec.device = device;
    spec.vocab_size = info.tokens ? info.vocab_size : 0;
    spec.seq_len = info.tokens ? info.seq_len : 0;
    spec.model_config = cfg.model_config;
    // --zero 3 builds the model unit by unit when it can (gpt): its parameters start on the meta
    // device and the set-up gives each rank only its shards (model/sharded_model.h). Not with
    // --init-from, which loads whole weights into the model.
    spec.meta_parameters = cfg.zero == 3 && device.is_cpu() && cfg.init_from.empty();
    model = untie_names(model_entry.factory(spec));
    if (!model)
      throw CollectiveError("model " + cfg.model + " (" + model_entry.origin + "): its factory returned no model");
    if (cfg.sync_bn) {
      std::shared_ptr<torch::nn::Module> root = model->module();
      if (!root)
        throw CollectiveError("--sync-bn: model " + cfg.model +
                              " has no torch::nn::Module tree to convert; "
                              "build its BatchNorm layers with hpctrain::make_batch_norm(..., spec.sync_bn, name)");
      try {
        if (convert_sync_batchnorm(root, comm.get()) != root) throw Error("the model itself is a BatchNorm layer");
      } catch (const Error& e) {
        throw CollectiveError(std::string("--sync-bn: ") + e.what());
      }
    }
    if (cfg.activation_checkpointing) {
      checkpointed_units = model->set_activation_checkpointing(true);
      if (checkpointed_units <= 0)
        throw CollectiveError("--activation-checkpointing: model " + cfg.model + " (" + model_entry.origin +
                              ") has no units to checkpoint (gpt: its transformer blocks; a plugin model implements "
                              "Model::set_activation_checkpointing, model/model.h)");
    }
    NamedTensors state = model->named_parameters();
    const auto first_meta = std::find_if(state.begin(), state.end(), [](const auto& p) { return p.second.is_meta(); });
    const bool meta = first_meta != state.end();
    const bool all_meta = std::all_of(state.begin(), state.end(), [](const auto& p) { return p.second.is_meta(); });
    if (meta && (!spec.meta_parameters || !all_meta))
      throw CollectiveError("model " + cfg.model + ": tensor " + first_meta->first +
                            " is on meta (no values); the run's device is " + device.str() +
                            " (build parameters on the CPU; all of them on meta only when ModelSpec::meta_parameters "
                            "asks for it)");
    if (!meta) model->to(device);
    state = model->named_parameters();
    if (state.empty()) throw CollectiveError("model " + cfg.model + " has no parameters to train");
    check_no_shared_memory(cfg.model, state);
    for (auto& b : model->named_buffers()) state.push_back(b);
    for (auto& [name, t] : state)
      if (t.device() != device && !t.is_meta())
        throw CollectiveError("model " + cfg.model + ": tensor " + name + " is on " + t.device().str() + " after to(" +
                              device.str() + "); the run's device is " + device.str() +
                              " (every parameter and buffer must move with Model::to)");
    init_model_weights(cfg, *model, device, world.rank() == 0);  // --init-from, unless --resume wins
    loss = std::make_unique<Loss>(cfg.loss, info.num_classes);
  });
  DdpOptions dopts;
  dopts.bucket_cap_mb = cfg.bucket_mb;
  dopts.broadcast_buffers = !cfg.sync_bn;
  dopts.zero = cfg.zero == 1 || cfg.zero == 2;
  dopts.shard_gradients = cfg.zero == 2;  // ZeRO-2: only the gradient shard persists
  dopts.grad_comm_dtype = cfg.grad_comm_dtype == "bf16"   ? at::kBFloat16
                         : cfg.grad_comm_dtype == "fp16" ? at::kHalf
                                                         : at::ScalarType::Undefined;
  if (cfg.zero == 3) {
    shard_parameters(dopts.grad_comm_dtype);  // trainer_fsdp.cpp: model becomes the sharded one
    NamedTensors frozen;
    for (auto& [name, p] : model->named_parameters())
      if (!p.requires_grad()) frozen.emplace_back(name, p);
    ddp = std::make_unique<DistributedDataParallel>(frozen, model->named_buffers(), *comm, dopts);
  } else {
    ddp = std::make_unique<DistributedDataParallel>(model->named_parameters(), model->named_buffers(), *comm, dopts);
  }
  for (auto& [name, p] : model->named_parameters())
    if (p.requires_grad()) params.push_back(p);
}

// Before anything is read or written: one forward of a zero micro-batch, in eval mode and
// without autograd (no BatchNorm statistics, dropout draws or collectives are touched), whose
// output must fit the targets. Collective: every rank reaches the same verdict.
void Trainer::State::check_model_output() {
  const auto& info = train->info();
  const int64_t b = std::max<int64_t>(cfg.batch_size / cfg.grad_accum, 1);
  std::vector<int64_t> xs{b}, ys{b};
  xs.insert(xs.end(), info.sample_shape.begin(), info.sample_shape.end());
  ys.insert(ys.end(), info.target_shape.begin(), info.target_shape.end());
  agree_on_failure(world.mpi_comm(), [&] {
    at::Tensor x = at::zeros(xs, at::TensorOptions().dtype(info.tokens ? at::kLong : at::kFloat).device(device));
    at::Tensor y = info.classification ? at::zeros(ys, at::TensorOptions().dtype(at::kLong).device(device))
                                       : at::zeros(ys, at::TensorOptions().device(device));
    at::NoGradGuard no_grad;
    bool was_training = model->is_training();
    model->train(false);
    at::Tensor out;
    try {
      out = model->forward(x);
    } catch (const c10::Error& e) {
      throw CollectiveError("model " + cfg.model + " fails on a batch of this data (input " + shape_string(x.sizes()) +
                            ", targets " + shape_string(y.sizes()) + "): " + last_line(e.what_without_backtrace()));
    }
    model->train(was_training);
    loss->check_output(out, y);
  });
}

}  // namespace hpctrain
