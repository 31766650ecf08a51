// The vocabulary of nanoGPT's data layout (dataset/nanogpt_bin.h): DIR/meta.pkl's `vocab_size`,
// read with the checkpoint stage's plain-pickle parser (ckpt/pickle_reader.h: no pickle code
// runs), else --vocab-size. Here in train/ because dataset/ may not include ckpt/.
//
// Contract (errors are one CollectiveError line naming the file or flag):
// - DIR without train.bin: 0; --vocab-size given (flag > 0) is an error there (.h5 token files
//   carry their own vocab_size).
// - DIR/meta.pkl present: its integer vocab_size; a file that is no plain pickle dict, or has no
//   integer vocab_size while no flag is given, is an error; a flag that disagrees with it too.
// - No meta.pkl: the flag, or an error asking for --vocab-size.
#pragma once

#include <cstdint>
#include <string>

namespace hpctrain {

int64_t nanogpt_vocab_size(const std::string& dir, int64_t flag);

}  // namespace hpctrain
