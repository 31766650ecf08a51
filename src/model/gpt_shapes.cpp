// gpt_parameter_numels: make_gpt's parameter list without building it, in registration order
// (wte, wpe, each block's ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj, then ln_f;
// each Linear's weight before its bias). Tested against the built model (unit_model) and the
// real run's figures (tests/e2e/test_zero2.sh).
#include "model/gpt.h"

namespace hpctrain {

std::vector<std::pair<std::string, int64_t>> gpt_parameter_numels(const GptOptions& o) {
  const int64_t E = o.n_embd;
  std::vector<std::pair<std::string, int64_t>> out;
  auto linear = [&](const std::string& name, int64_t in, int64_t outs) {
    out.emplace_back(name + ".weight", in * outs);
    if (o.bias) out.emplace_back(name + ".bias", outs);
  };
  auto layer_norm = [&](const std::string& name) {
    out.emplace_back(name + ".weight", E);
    if (o.bias) out.emplace_back(name + ".bias", E);
  };
  out.emplace_back("transformer.wte.weight", o.vocab_size * E);
  out.emplace_back("transformer.wpe.weight", o.block_size * E);
  for (int64_t i = 0; i < o.n_layer; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".";
    layer_norm(h + "ln_1");
    linear(h + "attn.c_attn", E, 3 * E);
    linear(h + "attn.c_proj", E, E);
    layer_norm(h + "ln_2");
    linear(h + "mlp.c_fc", E, 4 * E);
    linear(h + "mlp.c_proj", 4 * E, E);
  }
  layer_norm("transformer.ln_f");
  return out;
}

}  // namespace hpctrain
