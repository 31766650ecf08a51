// TorchScript models. The bytes are checked (a PyTorch zip with code records, forward
// Tensor -> Tensor) before torch::jit::load, so a torch.save'd state_dict gets its own
// message; every model the factory builds is a fresh load of the same bytes.
#include "model/torchscript_model.h"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/istream_adapter.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/check.h"

namespace hpctrain {
namespace {

class TorchScriptModel : public Model {
 public:
  explicit TorchScriptModel(torch::jit::Module m) : m_(std::move(m)) {}
  at::Tensor forward(const at::Tensor& x) override { return m_.forward({x}).toTensor(); }
  // A tied head (`self.head.weight = self.wte.weight`) is one tensor in two slots: listed once.
  NamedTensors named_parameters() override { return split_tied(all_parameters()).unique; }
  std::vector<std::pair<std::string, std::string>> tied_names() override { return split_tied(all_parameters()).aliases; }
  NamedTensors named_buffers() override {
    NamedTensors out;
    for (const auto& b : m_.named_buffers(/*recurse=*/true))
      if (b.value.defined()) out.emplace_back(b.name, b.value);
    return out;
  }
  void train(bool on) override { m_.train(on); }
  bool is_training() const override { return m_.is_training(); }
  void to(c10::Device device) override { m_.to(device); }

 private:
  NamedTensors all_parameters() {
    NamedTensors out;
    for (const auto& p : m_.named_parameters(/*recurse=*/true)) out.emplace_back(p.name, p.value);
    return out;
  }
  torch::jit::Module m_;
};

std::string type_list(const std::vector<c10::Argument>& args, size_t skip) {
  std::string s;
  for (size_t i = skip; i < args.size(); ++i)
    s += (s.empty() ? "" : ", ") + args[i].type()->annotation_str() + " " + args[i].name();
  return s;
}

// Loads and checks the archive: a TorchScript zip whose forward is Tensor -> Tensor.
torch::jit::Module load_checked(const std::string& bytes, const std::string& label) {
  {
    std::istringstream in(bytes);
    bool zip = false, has_code = false;
    try {
      caffe2::serialize::PyTorchStreamReader reader(&in);
      zip = true;
      has_code = reader.hasRecord("constants.pkl") || reader.hasRecord("code/__torch__.py");
      for (const auto& r : reader.getAllRecords()) has_code = has_code || r.rfind("code/", 0) == 0;
    } catch (const c10::Error&) {
    }
    if (!zip)
      throw CollectiveError(label +
                            " is not a TorchScript archive (not a PyTorch zip file); save the model "
                            "from Python with torch.jit.script(net).save(\"" +
                            label + "\")");
    if (!has_code)
      throw CollectiveError(label +
                            " is a pickled object saved with torch.save (a state_dict?), not a "
                            "TorchScript module: save the model itself with torch.jit.script(net).save(\"" +
                            label + "\") (or torch.jit.trace(net, example).save(...))");
  }
  torch::jit::Module m;
  try {
    std::istringstream in(bytes);
    m = torch::jit::load(in, c10::Device(c10::kCPU));
  } catch (const c10::Error& e) {
    throw CollectiveError(label + " cannot be loaded as TorchScript: " + e.what_without_backtrace());
  }
  auto forward = m.find_method("forward");
  if (!forward) throw CollectiveError(label + ": the TorchScript module has no forward method");
  const c10::FunctionSchema& schema = forward->function().getSchema();
  const auto& args = schema.arguments();
  const auto& rets = schema.returns();
  bool one_in = args.size() == 2 && args[1].type()->kind() == c10::TypeKind::TensorType;
  bool one_out = rets.size() == 1 && rets[0].type()->kind() == c10::TypeKind::TensorType;
  if (!one_in || !one_out)
    throw CollectiveError(
        label + ": forward(" + type_list(args, 1) + ") -> " +
        (rets.size() == 1 ? rets[0].type()->annotation_str() : std::string("(") + type_list(rets, 0) + ")") +
        "; hpctrain needs one tensor in, one tensor out: forward(self, x: Tensor) -> Tensor");
  return m;
}

}  // namespace

bool is_torchscript_name(const std::string& model) {
  std::error_code ec;
  return model.ends_with(".pt") || model.ends_with(".pth") || std::filesystem::is_regular_file(model, ec);
}

ModelFactory torchscript_factory(std::string bytes, std::string label) {
  // Checked once, on the caller's thread; every model the factory builds is a fresh load.
  load_checked(bytes, label);
  return [bytes = std::move(bytes), label = std::move(label)](const ModelSpec&) -> ModelPtr {
    return std::make_shared<TorchScriptModel>(load_checked(bytes, label));
  };
}

ModelEntry torchscript_entry(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw CollectiveError("--model " + path + ": does not exist or cannot be read");
  std::ostringstream ss;
  ss << f.rdbuf();
  ModelEntry e;
  e.name = path;
  e.description = "TorchScript module";
  e.origin = "torchscript";
  e.archive = ss.str();
  e.factory = torchscript_factory(e.archive, path);
  return e;
}

}  // namespace hpctrain
