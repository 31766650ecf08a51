// `hpctrain data text`: UTF-8 text files as token streams, bytes (vocab 256, tokenizer "bytes",
// the default) or a SentencePiece model's ids (dataset/tokenizer.h: the model is stored in both
// files, dataset/token_writer.h), written in the token data format (dataset/token_source.h,
// data/README.md). Both kinds record text_bytes (the text's size, for losses per byte).
//
// Contract:
// - Inputs are files and directories. A directory contributes its regular files (recursively,
//   in sorted path order, symlinks after the files under their own names), skipping files that are not UTF-8 text (a
//   NUL byte or an invalid sequence: e.g. fortune's .dat indexes) and paths that resolve to a file already read (the
//   .u8 symlinks of Debian's fortunes). A named file that is not UTF-8 text is an error.
// - The last `test_fraction` (0 < f < 1) of each file's bytes goes to test.h5, the rest to
//   train.h5, each split one stream (the files concatenated in order).
// - DIR/train.h5 and DIR/test.h5 appear together or not at all: both are written under
//   temporary names and renamed when complete (as dataset/prep/h5_writer.h). Every error is one
//   hpctrain::Error line naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataset/tokenizer.h"

namespace hpctrain {

struct TextTokensReport {
  int64_t files = 0, train_tokens = 0, test_tokens = 0;
  int64_t train_bytes = 0, test_bytes = 0;
  // SentencePiece: the first line (1-based, in the train split) that decode(encode(text)) does
  // not give back, 0 when every line round-trips (always 0 for bytes).
  int64_t first_changed_line = 0;
  std::vector<std::string> skipped;  // files left out (not UTF-8 text, or already read)
};

TextTokensReport write_text_tokens(const std::vector<std::string>& inputs, const std::string& out_dir,
                                   double test_fraction, const Tokenizer& tokenizer = Tokenizer::bytes());

// Writes one token file: `tokens` uint8 [n], attributes vocab_size, tokenizer, source.
void write_byte_tokens_h5(const std::string& path, const std::vector<uint8_t>& tokens, const std::string& source);

// Whether `bytes` is UTF-8 text: valid sequences (no overlongs or surrogates) and no NUL byte.
bool is_utf8_text(const std::string& bytes);

}  // namespace hpctrain
