// `hpctrain data text`: UTF-8 text files as byte-level token streams (vocab 256, tokenizer
// "bytes"), written in the token data format (dataset/token_source.h, data/README.md).
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

namespace hpctrain {

struct TextTokensReport {
  int64_t files = 0, train_tokens = 0, test_tokens = 0;
  std::vector<std::string> skipped;  // files left out (not UTF-8 text, or already read)
};

TextTokensReport write_text_tokens(const std::vector<std::string>& inputs, const std::string& out_dir,
                                   double test_fraction);

// Writes one token file: `tokens` uint8 [n], attributes vocab_size, tokenizer, source.
void write_byte_tokens_h5(const std::string& path, const std::vector<uint8_t>& tokens, const std::string& source);

// Whether `bytes` is UTF-8 text: valid sequences (no overlongs or surrogates) and no NUL byte.
bool is_utf8_text(const std::string& bytes);

}  // namespace hpctrain
