// export_hf_gpt2: manifest metadata -> GptOptions -> ckpt::write_hf_gpt2.
#include "eval/hf_export.h"

#include "ckpt/formats/hf_gpt2.h"
#include "ckpt/manifest.h"
#include "ckpt/resolve.h"
#include "model/gpt.h"
#include "runtime/check.h"

namespace hpctrain {

size_t export_hf_gpt2(const std::string& path, const std::string& out_dir, const std::string& cast) {
  const std::string dir = ckpt::resolve_checkpoint_path(path);
  const nlohmann::json meta = ckpt::read_manifest(dir).meta;
  const std::string model = meta.value("model", std::string("(none recorded)"));
  if (model != "gpt")
    throw Error("--format hf: " + dir + " holds model " + model +
                "; only --model gpt checkpoints export to Hugging Face GPT-2");
  ModelSpec spec;
  spec.name = model;
  spec.vocab_size = meta.value("vocab_size", int64_t{0});
  spec.seq_len = meta.value("seq_len", int64_t{0});
  if (meta.contains("config") && meta["config"].is_object())
    spec.model_config = meta["config"].value("model_config", std::string());
  const GptOptions o = gpt_options(spec);
  ckpt::HfGpt2Config c;
  c.vocab_size = o.vocab_size;
  c.n_positions = o.block_size;
  c.n_embd = o.n_embd;
  c.n_layer = o.n_layer;
  c.n_head = o.n_head;
  c.bias = o.bias;
  c.dropout = o.dropout;
  return ckpt::write_hf_gpt2(dir, out_dir, c, cast);
}

}  // namespace hpctrain
