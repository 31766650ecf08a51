// Trainer::State's data: the train and test loaders of --data, validated on every rank alike
// (a bad file is reported once, by rank 0) before anything else reads them.
#include "dataset/data_source.h"
#include "runtime/agree.h"
#include "runtime/check.h"
#include "runtime/tensor_text.h"
#include "train/nanogpt_meta.h"
#include "train/trainer_state_impl.h"

namespace hpctrain {

void Trainer::State::open_data() {
  LoaderOptions lo;
  lo.batch_size = cfg.batch_size;
  lo.prefetch = static_cast<int>(cfg.prefetch);
  lo.in_memory_mb = cfg.data_in_memory_mb;
  lo.augment = cfg.augment;
  lo.seed = static_cast<uint64_t>(cfg.seed);
  lo.device = device;
  lo.regression = Loss::regression(cfg.loss);
  if (lo.regression) lo.labels = cfg.targets_key;
  lo.seq_len = cfg.seq_len;
  lo.lazy_tokens = cfg.validate_tokens == "lazy";
  LoaderOptions eo = lo;
  eo.shuffle = false;
  eo.augment = false;
  // Every rank validates the same files: a bad one is reported once, by rank 0.
  agree_on_failure(world.mpi_comm(), [&] {
    lo.vocab_size = eo.vocab_size = nanogpt_vocab_size(cfg.data, cfg.vocab_size);  // nanoGPT .bin data
    train = std::make_unique<Loader>(split_files(cfg.data, "train"), world.size(), world.rank(), lo);
    test = std::make_unique<Loader>(split_files(cfg.data, "test"), world.size(), world.rank(), eo);
    const DatasetInfo &a = train->info(), &b = test->info();
    if (a.sample_shape != b.sample_shape || a.target_shape != b.target_shape)
      throw CollectiveError("the test set's samples " + shape_string(b.sample_shape) + " / targets " +
                            shape_string(b.target_shape) + " differ from the training set's " +
                            shape_string(a.sample_shape) + " / " + shape_string(a.target_shape) + " (" + cfg.data +
                            ")");
    if (a.tokens != b.tokens || a.vocab_size != b.vocab_size)
      throw CollectiveError(
          cfg.data + ": the test set " +
          (b.tokens ? "has vocab_size " + std::to_string(b.vocab_size) : std::string("is not a token stream")) +
          " but the training set " +
          (a.tokens ? "has vocab_size " + std::to_string(a.vocab_size) : std::string("is not a token stream")));
    if (a.tokens && Loss::regression(cfg.loss))
      throw CollectiveError("--loss " + cfg.loss + " needs float targets; token data trains with cross_entropy");
  });
}

}  // namespace hpctrain
