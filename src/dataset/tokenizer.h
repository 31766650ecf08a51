// Tokenizers of token data sets and language-model checkpoints: "bytes" (UTF-8 bytes, vocab 256)
// and "sentencepiece" (a BPE or unigram model trained with spm_train, libsentencepiece), held as
// the serialized model so that a data set and a checkpoint can carry it (the data file's dataset
// `tokenizer_model`, the checkpoint's tensor state/tokenizer).
//
// Contract:
// - Newlines: SentencePiece's normalizer treats "\n" as whitespace (it becomes a space or is
//   dropped). A sentencepiece tokenizer therefore encodes text line by line and puts one extra id,
//   newline_id() = the model's piece count, between lines; vocab_size() = pieces + 1. decode()
//   splits the ids at that id, decodes each run with the model and joins the runs with "\n".
//   So every newline survives; whether the text within a line survives exactly is the model's
//   normalization: train it with --normalization_rule_name=identity
//   --remove_extra_whitespaces=false (and --byte_fallback=true for characters outside its
//   pieces) for an exact round trip, decode(encode(text)) == text.
// - "bytes": encode gives the bytes (0..255), decode the bytes back; newline_id() is 10.
// - sentencepiece(model, label): one hpctrain::Error line "<label> is not a SentencePiece model
//   (...)" for anything the library cannot load or a model without pieces.
// - decode() of an id outside [0, vocab_size()) throws hpctrain::Error naming it.
// - A Tokenizer is cheap to copy (the model is shared) and const-thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hpctrain {

// The checkpoint tensor (uint8) that carries a language model's tokenizer model.
inline constexpr const char* kTokenizerTensor = "state/tokenizer";

class Tokenizer {
 public:
  static Tokenizer bytes();
  static Tokenizer sentencepiece(const std::string& model, const std::string& label);
  // "bytes", or a SentencePiece model file (read whole; errors name the path).
  static Tokenizer from_flag(const std::string& bytes_or_path);

  const std::string& name() const { return name_; }  // "bytes" | "sentencepiece"
  const std::string& model() const { return model_; }  // the serialized model ("" for bytes)
  int64_t vocab_size() const { return vocab_; }
  int64_t newline_id() const { return newline_; }
  std::vector<int64_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int64_t>& ids) const;
  // "bytes, vocab_size 256" / "sentencepiece (M.model: 999 pieces + the newline id 999), vocab_size 1000"
  std::string describe(const std::string& label = "") const;

 private:
  struct Model;
  std::string name_ = "bytes", model_;
  int64_t vocab_ = 256, newline_ = 10;
  std::shared_ptr<const Model> sp_;
};

}  // namespace hpctrain
