// The merged TorchScript archive: nested OutputArchives built from the dotted names
// (running_mean/var and num_batches_tracked marked as buffers) plus the hpctrain_meta string;
// reading walks the archives depth-first and keeps only the tensors.
#include "ckpt/formats/torchscript_archive.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <map>
#include <memory>
#include <utility>

#include "ckpt/merged_file.h"
#include "ckpt/formats/state_dict_pt.h"
#include "runtime/check.h"

namespace hpctrain::ckpt {
namespace {

constexpr const char* kMetaKey = "hpctrain_meta";

bool is_buffer_name(const std::string& name) {
  for (const char* suffix : {"running_mean", "running_var", "num_batches_tracked"}) {
    std::string s = suffix;
    if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) return true;
  }
  return false;
}

// One archive per module path: "features.0" -> nested archives features / 0.
struct ArchiveTree {
  torch::serialize::OutputArchive archive;
  std::map<std::string, std::unique_ptr<ArchiveTree>> children;
  void attach() {  // writes children bottom-up into their parents
    for (auto& [name, child] : children) {
      child->attach();
      archive.write(name, child->archive);
    }
  }
};

// Depth-first: every tensor under `prefix`; sub-archives are the module's children. Other
// attributes (TorchScript's "training" flag, the root's meta string) are not tensors: skipped.
void collect(torch::serialize::InputArchive& in, const std::string& prefix, CheckpointState& st) {
  for (const std::string& key : in.keys()) {
    c10::IValue v;
    in.read(key, v);
    if (v.isTensor()) {
      st.tensors.emplace_back("model/" + prefix + key, v.toTensor());
    } else if (v.isObject()) {
      torch::serialize::InputArchive child;
      in.read(key, child);
      collect(child, prefix + key + ".", st);
    }
  }
}

}  // namespace

namespace {

// LibTorch's OutputArchive takes the whole module before it writes a byte: this writer keeps
// every tensor it is handed until close().
class TorchScriptWriter : public MergedFileWriter {
 public:
  TorchScriptWriter(const std::string& path, const nlohmann::json& meta, std::vector<TensorSpec> specs)
      : MergedFileWriter(std::move(specs)), path_(path), meta_(meta) {}

 protected:
  void write(size_t i, const at::Tensor& t) override { model_.emplace_back(specs()[i].name, t); }
  void finish() override {
    write_torchscript(path_, meta_, model_);
    model_.clear();
  }

 private:
  std::string path_;
  nlohmann::json meta_;
  NamedTensors model_;
};

}  // namespace

std::unique_ptr<MergedFileWriter> open_torchscript(const std::string& path, const nlohmann::json& meta,
                                                   std::vector<TensorSpec> specs) {
  return std::make_unique<TorchScriptWriter>(path, meta, std::move(specs));
}

void write_torchscript(const std::string& path, const nlohmann::json& meta, const NamedTensors& model) {
  ArchiveTree root;
  for (const auto& [name, t] : model) {
    ArchiveTree* node = &root;
    size_t start = 0, dot;
    while ((dot = name.find('.', start)) != std::string::npos) {
      auto& child = node->children[name.substr(start, dot - start)];
      if (!child) child = std::make_unique<ArchiveTree>();
      node = child.get();
      start = dot + 1;
    }
    node->archive.write(name.substr(start), t, is_buffer_name(name));
  }
  root.attach();
  root.archive.write(kMetaKey, c10::IValue(meta.dump()));
  try {
    root.archive.save_to(path);
  } catch (const c10::Error& e) {
    throw Error("cannot write " + path + ": " + torch_error_line(e));
  }
}

CheckpointState read_torchscript(const std::string& path) {
  CheckpointState st;
  nlohmann::json stored;
  try {
    torch::serialize::InputArchive in;
    in.load_from(path, c10::Device(c10::kCPU));
    collect(in, "", st);
    c10::IValue meta;
    if (!in.try_read(kMetaKey, meta) || !meta.isString())
      throw Error(path + " has no " + kMetaKey +
                  " attribute (not written by `hpctrain ckpt merge --format torchscript`)");
    stored = nlohmann::json::parse(meta.toStringRef(), nullptr, false);
    if (stored.is_discarded()) throw Error(path + ": attribute " + kMetaKey + " is not JSON");
  } catch (const c10::Error& e) {
    throw Error(path + " is not a readable LibTorch archive (truncated or another format?): " + torch_error_line(e));
  }
  st.meta = meta_from_merged(stored);
  return st;
}

}  // namespace hpctrain::ckpt
