// `hpctrain data fashion-mnist|synthetic|text`: dataset preparation. Rank 0 writes the files (ranks
// would otherwise race on the same paths); its outcome is broadcast so every rank exits alike.
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "dataset/prep/fashion_mnist.h"
#include "dataset/prep/synthetic.h"
#include "dataset/prep/text_tokens.h"
#include "runtime/agree.h"
#include "runtime/check.h"
#include "runtime/world.h"

namespace hpctrain {
namespace {

int on_rank0(World& w, const std::function<std::string()>& work) {
  std::string done;
  run_on_rank0(w.mpi_comm(), "", [&] { done = work(); });
  if (w.rank() == 0) std::printf("%s\n", done.c_str());
  return 0;
}

void add(CLI::App& root, Action& chosen) {
  auto* d = root.add_subcommand("data", "prepare data sets (HDF5: images uint8 [N,C,H,W], labels int64 [N])");
  d->require_subcommand(1);

  auto* fm = d->add_subcommand("fashion-mnist", "convert Debian's dataset-fashion-mnist idx files");
  auto out = std::make_shared<std::string>();
  auto src = std::make_shared<std::string>(kFashionMnistDefaultSrc);
  fm->add_option("--out", *out, "output directory (train.h5, test.h5)")->required()->type_name("DIR");
  fm->add_option("--src", *src, "directory of the idx .gz files")->type_name("DIR");
  fm->callback([&chosen, out, src] {
    chosen = [out, src](World& w) {
      return on_rank0(w, [&] {
        convert_fashion_mnist(*src, *out);
        return "wrote " + *out + "/train.h5 (60000) and " + *out + "/test.h5 (10000)";
      });
    };
  });

  auto* sy = d->add_subcommand("synthetic", "generate a small learnable synthetic data set");
  auto sout = std::make_shared<std::string>();
  auto spec = std::make_shared<SyntheticSpec>();
  sy->add_option("--out", *sout, "output directory (train.h5, test.h5)")->required()->type_name("DIR");
  sy->add_option("--n", spec->train_size, "training samples")->required();
  sy->add_option("--test-n", spec->test_size, "test samples");
  sy->add_option("--channels", spec->channels, "image channels C (samples are [C,H,W] uint8)");
  sy->add_option("--height", spec->height, "image height H");
  sy->add_option("--width", spec->width, "image width W");
  sy->add_option("--classes", spec->classes, "number of classes (labels 0..classes-1, one pattern each)");
  sy->add_option("--seed", spec->seed, "seed of the class patterns and the noise (same seed, same files)");
  sy->add_option("--noise", spec->noise, "Gaussian noise std in pixel units");
  sy->callback([&chosen, sout, spec] {
    chosen = [sout, spec](World& w) {
      return on_rank0(w, [&] {
        write_synthetic(*sout, *spec);
        return "wrote " + *sout + "/train.h5 (" + std::to_string(spec->train_size) + ") and " + *sout + "/test.h5 (" +
               std::to_string(spec->test_size) + ")";
      });
    };
  });

  auto* tx = d->add_subcommand("text", "UTF-8 text files as token streams (bytes or SentencePiece) for language models");
  struct TextArgs {
    std::string out;
    double test_fraction = 0.1;
    std::string tokenizer = "bytes";
    std::vector<std::string> inputs;
  };
  auto ta = std::make_shared<TextArgs>();
  tx->add_option("--out", ta->out, "output directory (train.h5, test.h5: token ids, vocab_size, the tokenizer)")
      ->required()
      ->type_name("DIR");
  tx->add_option("--test-fraction", ta->test_fraction, "the last fraction of each file that goes to test.h5")
      ->type_name("FLOAT");
  tx->add_option("--tokenizer", ta->tokenizer,
                 "bytes (vocab 256), or a SentencePiece model file (spm_train; stored with the data; each newline "
                 "becomes one extra id, vocab_size = pieces + 1)")
      ->type_name("bytes|M.model");
  tx->add_option("inputs", ta->inputs, "text files, or directories of them (binary files are skipped)")
      ->required()
      ->type_name("FILE_OR_DIR");
  tx->callback([&chosen, ta] {
    chosen = [ta](World& w) {
      return on_rank0(w, [&] {
        const Tokenizer tok = Tokenizer::from_flag(ta->tokenizer);  // before anything is read or written
        TextTokensReport r = write_text_tokens(ta->inputs, ta->out, ta->test_fraction, tok);
        std::string msg = "wrote " + ta->out + "/train.h5 (" + std::to_string(r.train_tokens) + " tokens) and " +
                          ta->out + "/test.h5 (" + std::to_string(r.test_tokens) + " tokens) from " +
                          std::to_string(r.files) + " text file(s), tokenizer " + tok.describe(ta->tokenizer) + ", " +
                          std::to_string(r.train_bytes + r.test_bytes) + " bytes of text";
        if (tok.name() != "bytes")
          msg += r.first_changed_line ? "; the model's normalization changes the text (first at train line " +
                                            std::to_string(r.first_changed_line) +
                                            "; spm_train --normalization_rule_name=identity "
                                            "--remove_extra_whitespaces=false keeps it exact)"
                                      : "; decode(encode(text)) == text";
        if (!r.skipped.empty()) msg += "; skipped " + std::to_string(r.skipped.size()) + " (" + r.skipped[0] + ", ...)";
        return msg;
      });
    };
  });
}

CommandRegistrar reg(30, add);

}  // namespace
}  // namespace hpctrain
