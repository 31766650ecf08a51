// Text generation from a language-model checkpoint: `hpctrain generate` as a library call.
//
// Contract (not collective; the CLI runs it on rank 0):
// - Reads and verifies the checkpoint (any path read_checkpoint takes: a step directory, a root,
//   ROOT/latest, a merged .h5/.pt/.safetensors), rebuilds its model (eval/checkpoint_model.h;
//   a TorchScript model from its checkpoint directory) in eval mode, and extends the prompt by
//   max_new_tokens tokens, one forward per token over the last block_size (--seq-len) tokens of
//   the context (a longer context slides).
// - Sampling: temperature 0 takes the argmax (greedy, deterministic); else logits / temperature,
//   the top_k largest kept when top_k > 0, softmax in fp64 and one multinomial draw from a CPU
//   generator seeded with `seed` (the same request gives the same text).
// - The prompt: `prompt_tokens` when not empty, else `prompt` encoded with the checkpoint's
//   tokenizer (dataset/tokenizer.h): "bytes", or "sentencepiece" with the model the checkpoint
//   carries (tensor state/tokenizer, kept by a checkpoint directory and `ckpt merge --full`).
//   Errors (one line, CollectiveError): not a language-model checkpoint, an empty prompt, a token
//   id outside the vocabulary, text for a checkpoint without its tokenizer (a merged file without
//   --full, or an unknown tokenizer),
//   top_k > vocab_size, a weight or buffer with NaN/inf (named), logits that are not
//   [1, T, vocab_size] (their shape named) or not finite.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataset/tokenizer.h"
#include "model/model.h"

namespace hpctrain {

struct GenerateRequest {
  std::string ckpt;
  std::string prompt;
  std::vector<int64_t> prompt_tokens;
  int64_t max_new_tokens = 200;
  double temperature = 1.0;
  int64_t top_k = 0;  // 0: the whole vocabulary
  uint64_t seed = 0;
  std::string device = "auto";  // auto|cpu|cuda|cuda:N
  std::string model;            // "" = the checkpoint's own
  std::vector<std::string> model_lib;
};

struct GenerateResult {
  std::vector<int64_t> prompt, generated;  // token ids
  std::string tokenizer;                   // the checkpoint's ("bytes", "" when none)
  std::shared_ptr<const Tokenizer> codec;  // its tokenizer, null when it has none to use
  int64_t block_size = 0, vocab_size = 0;
  double seconds = 0;
  // prompt + generated decoded as text (invalid UTF-8 is kept as raw bytes); "" without a codec.
  std::string text() const;
};

GenerateResult generate(const GenerateRequest& req, ModelFactory factory = {});

}  // namespace hpctrain
