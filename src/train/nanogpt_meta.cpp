// nanogpt_vocab_size: reads DIR/meta.pkl whole (nanoGPT's are a few KiB: vocab_size, itos,
// stoi) and takes the integer entry vocab_size.
#include "train/nanogpt_meta.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ckpt/formats/pickle_reader.h"
#include "dataset/nanogpt_bin.h"
#include "runtime/check.h"

namespace hpctrain {

int64_t nanogpt_vocab_size(const std::string& dir, int64_t flag) {
  const std::string flag_text = "--vocab-size " + std::to_string(flag);
  if (!is_nanogpt_dir(dir)) {
    if (flag > 0)
      throw CollectiveError(flag_text + " is for nanoGPT's layout (DIR/train.bin, DIR/val.bin); " + dir +
                            " has no train.bin (.h5 token files carry their own vocab_size)");
    return 0;
  }
  const std::string meta = dir + "/meta.pkl";
  std::error_code ec;
  if (!std::filesystem::exists(meta, ec)) {
    if (flag > 0) return flag;
    throw CollectiveError(dir + " holds nanoGPT's train.bin but no meta.pkl: pass --vocab-size N (the number of "
                                "token ids; 50304 for nanoGPT's GPT-2 BPE data)");
  }
  std::ifstream in(meta, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (!in) throw CollectiveError("cannot read " + meta);
  int64_t vocab = 0;
  try {
    for (const auto& [key, value] : ckpt::unpickle_int_entries(ss.str(), meta))
      if (key == "vocab_size") vocab = value;
  } catch (const Error& e) {
    throw CollectiveError(e.what());
  }
  if (vocab <= 0) {
    if (flag > 0) return flag;
    throw CollectiveError(meta + " has no integer vocab_size: pass --vocab-size N");
  }
  if (flag > 0 && flag != vocab)
    throw CollectiveError(flag_text + " disagrees with " + meta + "'s vocab_size " + std::to_string(vocab) +
                          ": leave the flag out, or fix one of them");
  return vocab;
}

}  // namespace hpctrain
