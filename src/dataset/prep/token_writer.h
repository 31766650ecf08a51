// Writes one token file of a tokenized text data set (the token data format of
// dataset/token_source.h, data/README.md) for any Tokenizer (dataset/tokenizer.h):
//   tokens          uint16 [n] (int32 when vocab_size > 65536)
//   tokenizer_model uint8 [bytes]: the serialized SentencePiece model (not for "bytes")
//   attributes      vocab_size, tokenizer ("bytes" | "sentencepiece"), text_bytes (the bytes of
//                   UTF-8 text the stream encodes: a loss per byte is total nats / text_bytes),
//                   source
// It writes `path` directly; `data text` writes the pair under temporary names and renames both
// when complete (dataset/h5_writer.h write_split_pair). Errors: one hpctrain::Error line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain {

class Tokenizer;

void write_token_ids_h5(const std::string& path, const std::vector<int64_t>& ids, const Tokenizer& tokenizer,
                        int64_t text_bytes, const std::string& source);

// The serialized tokenizer model stored with a token file ("" when it has none). Caller holds
// no h5::lock() (taken here).
std::string read_tokenizer_model(const std::string& path);

}  // namespace hpctrain
