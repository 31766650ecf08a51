// The zoo's GPT (registered with the others in models.cpp): modules registered in nanoGPT's order (so names and
// parameter order match examples/gpt_reference.py), GPT-2 initialisation, and the model-interface extras (describe:
// size and FLOPs per token; decays: matrices only).
#include "model/gpt.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cmath>
#include <cstdio>

#include "model/checkpoint_unit.h"
#include "runtime/check.h"
#include "runtime/tensor_text.h"

namespace hpctrain {
namespace nn = torch::nn;
namespace {

// gpt's layers hold their own `weight` (and `bias`) created by at::empty on the build's device:
// construction draws nothing and touches no parameter memory (on the meta device none exists);
// every value comes from init_parameter. set() swaps in the tensor a --zero 3 set-up made.
struct ParamsImpl : nn::Module {
  at::Tensor weight, bias;
  void make(std::vector<int64_t> shape, int64_t bias_n, const at::TensorOptions& opts) {
    weight = register_parameter("weight", at::empty(shape, opts));
    if (bias_n > 0) bias = register_parameter("bias", at::empty({bias_n}, opts));
  }
  void set(const std::string& key, const at::Tensor& t) {
    parameters_[key] = t;
    (key == "weight" ? weight : bias) = t;
  }
};

struct LayerNormImpl : ParamsImpl {
  LayerNormImpl(int64_t n, bool bias, const at::TensorOptions& opts) : n(n) { make({n}, bias ? n : 0, opts); }
  at::Tensor forward(const at::Tensor& x) { return at::layer_norm(x, {n}, weight, bias, 1e-5); }
  int64_t n;
};
TORCH_MODULE(LayerNorm);

struct LinearImpl : ParamsImpl {  // nn::Linear's math: x W^T + b
  LinearImpl(int64_t in, int64_t out, bool bias, const at::TensorOptions& opts) {
    make({out, in}, bias ? out : 0, opts);
  }
  at::Tensor forward(const at::Tensor& x) { return at::linear(x, weight, bias); }
};
TORCH_MODULE(Linear);

struct EmbeddingImpl : ParamsImpl {  // nn::Embedding's math (no padding index, dense gradient)
  EmbeddingImpl(int64_t n, int64_t dim, const at::TensorOptions& opts) { make({n, dim}, 0, opts); }
  at::Tensor forward(const at::Tensor& idx) { return at::embedding(weight, idx); }
};
TORCH_MODULE(Embedding);

// GPT-2's initial value of parameter `name` (gpt.h): the draws of one parameter, so that filling
// the parameters one by one in named_parameters() order equals filling the whole model.
void init_parameter(const GptOptions& o, const std::string& name, at::Tensor p) {
  at::NoGradGuard no_grad;
  if (name.find("ln_") != std::string::npos)
    name.ends_with(".weight") ? p.fill_(1.0) : p.zero_();  // LayerNorm: weight 1, bias 0
  else if (p.dim() == 1)
    p.zero_();
  else if (name.ends_with("c_proj.weight"))
    p.normal_(0.0, 0.02 / std::sqrt(2.0 * double(o.n_layer)));
  else
    p.normal_(0.0, 0.02);
}

struct AttentionImpl : nn::Module {
  AttentionImpl(const GptOptions& o, const at::TensorOptions& t) : heads(o.n_head), p(o.dropout) {
    c_attn = register_module("c_attn", Linear(o.n_embd, 3 * o.n_embd, o.bias, t));
    c_proj = register_module("c_proj", Linear(o.n_embd, o.n_embd, o.bias, t));
  }
  at::Tensor forward(const at::Tensor& x) {
    const int64_t b = x.size(0), t = x.size(1), e = x.size(2);
    auto qkv = c_attn->forward(x).split(e, 2);
    auto heads_of = [&](const at::Tensor& z) { return z.view({b, t, heads, e / heads}).transpose(1, 2); };
    at::Tensor y = at::scaled_dot_product_attention(heads_of(qkv[0]), heads_of(qkv[1]), heads_of(qkv[2]), {},
                                                    is_training() ? p : 0.0, /*is_causal=*/true);
    y = y.transpose(1, 2).contiguous().view({b, t, e});
    return at::dropout(c_proj->forward(y), p, is_training());
  }
  int64_t heads;
  double p;
  Linear c_attn{nullptr}, c_proj{nullptr};
};
TORCH_MODULE(Attention);

struct MlpImpl : nn::Module {
  MlpImpl(const GptOptions& o, const at::TensorOptions& t) : p(o.dropout) {
    c_fc = register_module("c_fc", Linear(o.n_embd, 4 * o.n_embd, o.bias, t));
    c_proj = register_module("c_proj", Linear(4 * o.n_embd, o.n_embd, o.bias, t));
  }
  at::Tensor forward(const at::Tensor& x) {
    return at::dropout(c_proj->forward(at::gelu(c_fc->forward(x))), p, is_training());
  }
  double p;
  Linear c_fc{nullptr}, c_proj{nullptr};
};
TORCH_MODULE(Mlp);

struct BlockImpl : nn::Module {
  BlockImpl(const GptOptions& o, const at::TensorOptions& t) {
    ln_1 = register_module("ln_1", LayerNorm(o.n_embd, o.bias, t));
    attn = register_module("attn", Attention(o, t));
    ln_2 = register_module("ln_2", LayerNorm(o.n_embd, o.bias, t));
    mlp = register_module("mlp", Mlp(o, t));
  }
  at::Tensor forward(at::Tensor x) {
    x = x + attn->forward(ln_1->forward(x));
    return x + mlp->forward(ln_2->forward(x));
  }
  LayerNorm ln_1{nullptr}, ln_2{nullptr};
  Attention attn{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(Block);

struct TransformerImpl : nn::Module {
  TransformerImpl(const GptOptions& o, const at::TensorOptions& t) {
    wte = register_module("wte", Embedding(o.vocab_size, o.n_embd, t));
    wpe = register_module("wpe", Embedding(o.block_size, o.n_embd, t));
    h = register_module("h", nn::ModuleList());
    for (int64_t i = 0; i < o.n_layer; ++i) h->push_back(Block(o, t));
    ln_f = register_module("ln_f", LayerNorm(o.n_embd, o.bias, t));
  }
  Embedding wte{nullptr}, wpe{nullptr};
  nn::ModuleList h{nullptr};
  LayerNorm ln_f{nullptr};
};
TORCH_MODULE(Transformer);

struct GptImpl : nn::Module {
  // On the meta device (meta true) the parameters have shapes and no memory: init_parameter and
  // ParamsImpl::set give them values later (a --zero 3 set-up); otherwise they are initialised here.
  GptImpl(const GptOptions& o, bool meta) : o(o) {
    transformer = register_module(
        "transformer", Transformer(o, at::TensorOptions().dtype(at::kFloat).device(meta ? at::kMeta : at::kCPU)));
    if (!meta)
      for (auto& item : named_parameters(true)) init_parameter(o, item.key(), item.value());
  }
  at::Tensor forward(const at::Tensor& idx) {
    if (idx.dim() != 2 || idx.size(1) > o.block_size)
      throw CollectiveError("gpt: input " + shape_string(idx.sizes()) +
                            "; the model takes token ids [B, t] with t <= its block size " +
                            std::to_string(o.block_size));
    const int64_t t = idx.size(1);
    at::Tensor pos = at::arange(t, idx.options());
    at::Tensor x = transformer->wte->forward(idx) + transformer->wpe->forward(pos);
    x = at::dropout(x, o.dropout, is_training());
    size_t i = 0;
    for (const auto& block : *transformer->h) {
      BlockImpl* b = block->as<Block>();
      auto unit = [this, b](const at::Tensor& in) {
        return checkpoint ? checkpoint_unit([b](const at::Tensor& z) { return b->forward(z); }, in, b->parameters())
                          : b->forward(in);
      };
      x = runner ? runner(i++, unit, x) : unit(x);
    }
    x = transformer->ln_f->forward(x);
    return at::linear(x, transformer->wte->weight);  // the LM head, tied to wte
  }
  GptOptions o;
  Transformer transformer{nullptr};
  bool checkpoint = false;  // --activation-checkpointing: each block recomputed in backward
  UnitRunner runner;        // --zero 3: each block's forward runs through it
};
TORCH_MODULE(Gpt);

class GptModel final : public ModuleModel {
 public:
  explicit GptModel(Gpt net)
      : ModuleModel(net.ptr(), [raw = net.get()](const at::Tensor& x) { return raw->forward(x); }),
        net_(net.get()),
        o_(net->o) {}

  int64_t set_activation_checkpointing(bool on) override {
    net_->checkpoint = on;
    return o_.n_layer;  // the units: one per transformer block
  }

  void init_parameter(const std::string& name, at::Tensor& out) override { hpctrain::init_parameter(o_, name, out); }

  void set_parameter(const std::string& name, const at::Tensor& value) override {
    const size_t dot = name.rfind('.');
    auto modules = net_->named_modules();
    auto* layer = dot == std::string::npos ? nullptr : modules.find(name.substr(0, dot));
    auto* params = layer ? dynamic_cast<ParamsImpl*>(layer->get()) : nullptr;
    if (!params || !params->named_parameters(false).contains(name.substr(dot + 1)))
      throw Error("gpt: no parameter " + name);
    params->set(name.substr(dot + 1), value);
  }

  std::vector<ModelUnit> set_unit_runner(UnitRunner run) override {
    net_->runner = std::move(run);
    std::vector<ModelUnit> units;
    for (int64_t i = 0; i < o_.n_layer; ++i) {
      ModelUnit u{"transformer.h." + std::to_string(i), {}};
      for (auto& [name, p] : named_parameters())
        if (name.rfind(u.name + ".", 0) == 0) u.params.push_back(name);
      units.push_back(std::move(u));
    }
    return units;
  }

  bool decays(const std::string& name, const at::Tensor& p) override {
    return p.dim() >= 2 && name != "transformer.wpe.weight";
  }

  // Training FLOPs per token: 6 per weight but the position table (forward + backward) and the
  // attention scores 12 L E T (nanoGPT's estimate, PaLM appendix B).
  double train_flops_per_token() override {
    int64_t n = 0;
    for (auto& [name, p] : named_parameters()) n += p.numel();
    const int64_t non_pos = n - o_.block_size * o_.n_embd;
    return 6.0 * double(non_pos) + 12.0 * double(o_.n_layer * o_.n_embd * o_.block_size);
  }

  std::string describe() override {
    int64_t n = 0, matrices = 0;
    for (auto& [name, p] : named_parameters()) {
      n += p.numel();
      matrices += decays(name, p) ? 1 : 0;
    }
    const int64_t non_pos = n - o_.block_size * o_.n_embd;
    const double flops = train_flops_per_token();
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "gpt L%lld H%lld E%lld T%lld V%lld, dropout %g, bias %s: %lld parameters (%lld without the "
                  "position table), %.2f MFLOPs per token (6N + 12LET), weight decay on %lld matrices (not on "
                  "biases, LayerNorms or wpe)",
                  (long long)o_.n_layer, (long long)o_.n_head, (long long)o_.n_embd, (long long)o_.block_size,
                  (long long)o_.vocab_size, o_.dropout, o_.bias ? "true" : "false", (long long)n, (long long)non_pos,
                  flops / 1e6, (long long)matrices);
    return buf;
  }

 private:
  GptImpl* net_;  // owned by the ModuleModel
  GptOptions o_;
};

int64_t int_value(const std::string& key, const std::string& v) {
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || x < 1 || x > 1000000)
    throw CollectiveError("--model-config " + key + "=" + v + ": expected a positive integer");
  return x;
}

}  // namespace

GptOptions gpt_options(const ModelSpec& spec) {
  if (spec.vocab_size <= 0 || spec.seq_len <= 0)
    throw CollectiveError(
        "model gpt needs token data (files with a 'tokens' dataset and a vocab_size attribute, and --seq-len T); "
        "this data has samples of " +
        std::to_string(spec.sample_shape.size()) + " dimension(s)");
  GptOptions o;
  o.vocab_size = spec.vocab_size;
  o.block_size = spec.seq_len;
  for (const auto& [key, v] : parse_model_config(spec.model_config)) {
    if (key == "n_layer")
      o.n_layer = int_value(key, v);
    else if (key == "n_head")
      o.n_head = int_value(key, v);
    else if (key == "n_embd")
      o.n_embd = int_value(key, v);
    else if (key == "dropout") {
      char* end = nullptr;
      o.dropout = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !(o.dropout >= 0 && o.dropout < 1))
        throw CollectiveError("--model-config dropout=" + v + ": expected a number in [0, 1)");
    } else if (key == "bias") {
      if (v != "true" && v != "false" && v != "1" && v != "0")
        throw CollectiveError("--model-config bias=" + v + ": expected true or false");
      o.bias = v == "true" || v == "1";
    } else {
      throw CollectiveError("--model-config: unknown key " + key +
                            " for model gpt (allowed: n_layer, n_head, n_embd, dropout, bias)");
    }
  }
  if (o.n_embd % o.n_head != 0)
    throw CollectiveError("--model-config: n_embd " + std::to_string(o.n_embd) + " is not divisible by n_head " +
                          std::to_string(o.n_head));
  return o;
}

ModelPtr make_gpt(const GptOptions& o, bool meta) { return std::make_shared<GptModel>(Gpt(o, meta)); }

}  // namespace hpctrain
