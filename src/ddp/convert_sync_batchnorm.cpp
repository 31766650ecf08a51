// convert_sync_batchnorm and make_batch_norm: getting SyncBatchNorm into a model.
//
// Why Sequential needs care: SequentialImpl::forward walks its own std::vector<AnyModule>, not
// the registered children, so Module::replace_module alone would leave forward calling the
// old BatchNorm. Both are updated here. Custom parents are refused for the same reason (their
// typed member holders cannot be reached from outside).
#include "ddp/sync_batchnorm.h"

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>

#include "runtime/check.h"

namespace hpctrain {
namespace {

using torch::nn::Module;

// The SyncBatchNorm replacing `m`, or null when `m` is not a BatchNorm{1,2,3}d.
std::shared_ptr<SyncBatchNormImpl> sync_version(const std::shared_ptr<Module>& m, Communicator* comm,
                                                const std::string& path) {
  const torch::nn::BatchNormOptions* opts = nullptr;
  if (auto b1 = std::dynamic_pointer_cast<torch::nn::BatchNorm1dImpl>(m))
    opts = &b1->options;
  else if (auto b2 = std::dynamic_pointer_cast<torch::nn::BatchNorm2dImpl>(m))
    opts = &b2->options;
  else if (auto b3 = std::dynamic_pointer_cast<torch::nn::BatchNorm3dImpl>(m))
    opts = &b3->options;
  if (!opts) return nullptr;
  auto s = std::make_shared<SyncBatchNormImpl>(*opts, comm, path, *m);
  s->train(m->is_training());
  return s;
}

// Points `parent`'s forward path and registry at `repl` instead of `old`. Returns false when the
// parent is a custom module (whose typed members we cannot reach).
bool swap_child(Module& parent, const std::string& name, const std::shared_ptr<Module>& old,
                const std::shared_ptr<SyncBatchNormImpl>& repl) {
  if (auto* seq = dynamic_cast<torch::nn::SequentialImpl*>(&parent)) {
    for (auto& any : *seq)
      if (any.ptr() == old) any = torch::nn::AnyModule(repl);
  } else if (auto* list = dynamic_cast<torch::nn::ModuleListImpl*>(&parent)) {
    for (auto& m : *list)
      if (m == old) m = repl;
  } else if (auto* dict = dynamic_cast<torch::nn::ModuleDictImpl*>(&parent)) {
    for (auto& item : *dict)
      if (item.value() == old) item.value() = repl;
  } else {
    return false;
  }
  parent.replace_module(name, std::static_pointer_cast<Module>(repl));
  return true;
}

void convert_children(Module& parent, const std::string& prefix, Communicator* comm,
                      std::vector<std::string>* replaced) {
  for (const auto& item : parent.named_children()) {
    const std::string path = prefix.empty() ? item.key() : prefix + "." + item.key();
    auto repl = sync_version(item.value(), comm, path);
    if (!repl) {
      convert_children(*item.value(), path, comm, replaced);
      continue;
    }
    if (!swap_child(parent, item.key(), item.value(), repl))
      throw Error("convert_sync_batchnorm: cannot replace '" + path + "': its parent " + parent.name() +
                  " is a custom module whose member would keep calling the old BatchNorm; "
                  "build it with hpctrain::make_batch_norm() or hold the layer in a Sequential");
    if (replaced) replaced->push_back(path);
  }
}

}  // namespace

std::shared_ptr<Module> convert_sync_batchnorm(std::shared_ptr<Module> root, Communicator* comm,
                                               std::vector<std::string>* replaced) {
  if (auto repl = sync_version(root, comm, "")) {
    if (replaced) replaced->push_back("");
    return repl;
  }
  convert_children(*root, "", comm, replaced);
  return root;
}

torch::nn::AnyModule make_batch_norm(int dims, const torch::nn::BatchNormOptions& options, Communicator* comm,
                                     const std::string& name) {
  if (dims < 1 || dims > 3)
    throw Error("make_batch_norm(" + name + "): dims must be 1, 2 or 3, got " + std::to_string(dims));
  if (comm) return torch::nn::AnyModule(SyncBatchNorm(options, comm, name));
  switch (dims) {
    case 1: return torch::nn::AnyModule(torch::nn::BatchNorm1d(options));
    case 2: return torch::nn::AnyModule(torch::nn::BatchNorm2d(options));
    default: return torch::nn::AnyModule(torch::nn::BatchNorm3d(options));
  }
}

}  // namespace hpctrain
