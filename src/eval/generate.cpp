// generate(): the checkpoint's model on one device, the prompt as ids, then a loop of forward
// over the last block_size ids, the last position's logits, and argmax or a seeded draw.
#include "eval/generate.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "ckpt/checkpoint.h"
#include "runtime/check.h"
#include "runtime/device.h"
#include "runtime/tensor_text.h"
#include "eval/checkpoint_model.h"

namespace hpctrain {

std::string GenerateResult::text() const {
  if (!codec) return "";
  std::vector<int64_t> all = prompt;
  all.insert(all.end(), generated.begin(), generated.end());
  return codec->decode(all);
}

namespace {

// The checkpoint's tokenizer, or null when it names none or its model is not in the checkpoint.
std::shared_ptr<const Tokenizer> checkpoint_tokenizer(const CheckpointState& st, const std::string& name,
                                                      const std::string& label) {
  if (name == "bytes") return std::make_shared<const Tokenizer>(Tokenizer::bytes());
  if (name != "sentencepiece") return nullptr;
  for (const auto& [tname, t] : st.tensors)
    if (tname == kTokenizerTensor) {
      at::Tensor bytes = t.cpu().contiguous();
      try {
        return std::make_shared<const Tokenizer>(Tokenizer::sentencepiece(
            std::string(static_cast<const char*>(bytes.data_ptr()), bytes.numel()), label + "'s " + kTokenizerTensor));
      } catch (const Error& e) {
        throw CollectiveError(e.what());
      }
    }
  return nullptr;
}

}  // namespace

GenerateResult generate(const GenerateRequest& req, ModelFactory factory) {
  auto t0 = std::chrono::steady_clock::now();
  if (req.max_new_tokens < 0) throw CollectiveError("--max-new-tokens must be >= 0");
  if (!(req.temperature >= 0)) throw CollectiveError("--temperature must be >= 0 (0: greedy)");
  if (req.top_k < 0) throw CollectiveError("--top-k must be >= 0 (0: the whole vocabulary)");
  DeviceChoice dev = choose_device(req.device, 0, 1, visible_cuda_devices());
  activate_device(dev);
  const c10::Device device = dev.cuda ? c10::Device(c10::kCUDA, dev.index) : c10::Device(c10::kCPU);
  CheckpointState st = read_checkpoint(req.ckpt, device);
  ModelSpec spec = checkpoint_model_spec(st, req.ckpt);
  if (spec.vocab_size <= 0 || spec.seq_len <= 0)
    throw CollectiveError(req.ckpt + " holds model " + spec.name +
                          ", which was not trained on token data (no vocab_size and seq_len in its metadata): "
                          "nothing to generate");
  if (req.top_k > spec.vocab_size)
    throw CollectiveError("--top-k " + std::to_string(req.top_k) + " is larger than the vocabulary of " + req.ckpt +
                          " (vocab_size " + std::to_string(spec.vocab_size) + "): pass at most " +
                          std::to_string(spec.vocab_size) + ", or 0 for the whole vocabulary");
  spec.device = device;
  GenerateResult r;
  r.tokenizer = st.meta.value("tokenizer", std::string());
  r.codec = checkpoint_tokenizer(st, r.tokenizer, req.ckpt);
  if (r.codec && r.codec->vocab_size() != spec.vocab_size)
    throw CollectiveError(req.ckpt + "'s tokenizer has vocab_size " + std::to_string(r.codec->vocab_size()) +
                          " but its model " + std::to_string(spec.vocab_size));
  r.block_size = spec.seq_len;
  r.vocab_size = spec.vocab_size;
  if (!req.prompt_tokens.empty()) {
    r.prompt = req.prompt_tokens;
  } else {
    if (!r.codec)
      throw CollectiveError(
          "--prompt TEXT needs the checkpoint's tokenizer; " + req.ckpt + "'s tokenizer is " +
          (r.tokenizer.empty() ? "not recorded" : "\"" + r.tokenizer + "\"") +
          (r.tokenizer == "sentencepiece" ? " without its model (a merged file keeps it only with ckpt merge --full)"
                                          : "") +
          ": pass token ids with --prompt-tokens 1,2,3");
    r.prompt = r.codec->encode(req.prompt);
  }
  if (r.prompt.empty())
    throw CollectiveError("the prompt is empty: give at least one token (--prompt or --prompt-tokens)");
  for (int64_t t : r.prompt)
    if (t < 0 || t >= spec.vocab_size)
      throw CollectiveError("prompt token " + std::to_string(t) + " is outside the vocabulary [0, " +
                            std::to_string(spec.vocab_size) + ")");

  ModelPtr model = untie_names((factory ? factory : checkpoint_model_factory(st, req.ckpt, req.model, req.model_lib))(spec));
  if (!model) throw CollectiveError("model " + spec.name + ": its factory returned no model");
  model->to(device);
  const NamedTensors target = state_dict_names(*model);
  load_model_state(st, target, "checkpoint " + req.ckpt);
  model->train(false);
  for (const auto& [name, t] : target)  // a damaged or diverged checkpoint: name what is wrong
    if (t.is_floating_point() && !t.isfinite().all().item<bool>())
      throw CollectiveError("checkpoint " + req.ckpt + ": " + name + " holds non-finite values (NaN or inf)");

  at::NoGradGuard no_grad;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(req.seed);
  std::vector<int64_t> ctx = r.prompt;
  for (int64_t i = 0; i < req.max_new_tokens; ++i) {
    const int64_t n = std::min<int64_t>(int64_t(ctx.size()), spec.seq_len);
    at::Tensor idx = at::tensor(std::vector<int64_t>(ctx.end() - n, ctx.end()), at::kLong).view({1, n}).to(device);
    at::Tensor logits = model->forward(idx);
    if (logits.dim() != 3 || logits.size(0) != 1 || logits.size(1) != n || logits.size(2) != spec.vocab_size)
      throw CollectiveError("model " + spec.name + " returned logits " + shape_string(logits.sizes()) + " for input " +
                            shape_string(idx.sizes()) + "; a language model with the checkpoint's vocab_size " +
                            std::to_string(spec.vocab_size) +
                            " returns [B, T, vocab_size] = " + shape_string({1, n, spec.vocab_size}));
    at::Tensor last = logits[0][n - 1].to(at::kCPU, at::kFloat);
    if (!last.isfinite().all().item<bool>())
      throw CollectiveError("model " + spec.name + " returned non-finite logits (NaN or inf) for generated token " +
                            std::to_string(i) + " (context of " + std::to_string(n) + " tokens)");
    int64_t next;
    if (req.temperature == 0) {
      next = last.argmax().item<int64_t>();
    } else {
      at::Tensor z = last.to(at::kDouble) / req.temperature;
      if (req.top_k > 0 && req.top_k < z.numel()) {
        double kth = std::get<0>(z.topk(req.top_k)).min().item<double>();
        z = z.masked_fill(z < kth, -std::numeric_limits<double>::infinity());
      }
      next = at::multinomial(at::softmax(z, 0), 1, false, gen).item<int64_t>();
    }
    ctx.push_back(next);
    r.generated.push_back(next);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace hpctrain
