// checkpoint_model_factory / checkpoint_model_spec: the checkpoint's model from its metadata
// (name, origin, data shape, language-model sizes) and, for TorchScript, its stored archive.
#include "eval/checkpoint_model.h"

#include "model/model_registry.h"
#include "model/torchscript_model.h"
#include "runtime/check.h"

namespace hpctrain {

// The factory that rebuilds the checkpoint's model, or a one-line reason why there is none.
ModelFactory checkpoint_model_factory(const CheckpointState& st, const std::string& label, const std::string& model,
                                      const std::vector<std::string>& model_lib) {
  if (!model.empty()) return resolve_model(model, model_lib).factory;
  const nlohmann::json& meta = st.meta;
  const std::string name = meta["model"].get<std::string>();
  const std::string origin = meta.value("model_origin", std::string("zoo"));
  if (origin == "torchscript") {
    for (const auto& [tname, t] : st.tensors)
      if (tname == kTorchScriptTensor) {
        at::Tensor bytes = t.cpu().contiguous();
        return torchscript_factory(std::string(static_cast<const char*>(bytes.data_ptr()), bytes.numel()),
                                   label + " (TorchScript module " + name + ")");
      }
    throw CollectiveError(label +
                          " holds no TorchScript module (a merged file keeps only the weights): "
                          "evaluate the checkpoint directory, or pass --model " +
                          name);
  }
  if (origin == "program")
    throw CollectiveError(label + " holds model \"" + name +
                          "\" built by a program's own factory; "
                          "evaluate it with that program (hpctrain::evaluate_checkpoint with its factory)");
  for (const auto& lib : model_lib) load_model_library(lib);
  for (const auto& e : registered_models())
    if (e.name == name) return e.factory;
  if (origin != "zoo")
    throw CollectiveError(label + " holds model \"" + name + "\" from the plugin " + origin +
                          ", which is not loaded: pass --model-lib " + origin);
  throw CollectiveError(label + " holds model \"" + name + "\", which this build does not have");
}

ModelSpec checkpoint_model_spec(const CheckpointState& st, const std::string& label) {
  const nlohmann::json& m = st.meta;
  if (!m.contains("model"))
    throw CollectiveError(label + " has no model name in its metadata (not written by hpctrain train)");
  ModelSpec spec;
  spec.name = m["model"].get<std::string>();
  spec.sample_shape = m.value("sample_shape", std::vector<int64_t>{});
  spec.num_classes = m.value("num_classes", int64_t{0});
  spec.target_shape = m.value("target_shape", std::vector<int64_t>{});
  spec.vocab_size = m.value("vocab_size", int64_t{0});
  spec.seq_len = m.value("seq_len", int64_t{0});
  if (m.contains("config") && m["config"].is_object()) spec.model_config = m["config"].value("model_config", "");
  return spec;
}

}  // namespace hpctrain
