// Loader: batches of this rank's share, assembled (read, augment, normalize) and optionally
// moved to the device by a background thread that runs up to `prefetch` batches ahead.
//
// Contract:
// - Same batches in the same order for any prefetch depth (prefetch = 0: synchronous, built in
//   next()). Augmentation is deterministic per (seed, epoch, sample index).
// - Every rank gets batches_per_epoch() batches of equal sizes (see sampler.h); Batch.valid
//   marks padding duplicates.
// - data_wait_seconds(): total time the consumer spent blocked in next() waiting for data (with
//   prefetch = 0, all of the assembly time).
// - Errors in the background thread (a read failing mid-epoch) are rethrown by next().
//   Destruction or start_epoch() mid-epoch stops and joins the thread cleanly.
// - The constructor starts epoch 0 at batch 0 (so a plain loop can call next() at once);
//   start_epoch()/start_at() restart it anywhere.
// - The data files are opened once in the constructor (validating them on the caller's thread,
//   so errors come before training) and afterwards used only by the producing thread. Several
//   numbered files are one data set (dataset/data_source.h).
// - Batch.images has the file's per-sample shape; Batch.labels holds int64 class labels [B], or
//   float targets [B, t1..tm] when `regression` is set.
// - Token data (seq_len set, files with `tokens`): Batch.images holds int64 input ids [B, T] and
//   Batch.labels the next-token targets [B, T]; no normalization, augmentation is an error.
// The dataset/ stage among the others, its threads and locks: docs/architecture.md.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "dataset/batch.h"
#include "dataset/data_source.h"
#include "dataset/dataset_info.h"
#include "dataset/sampler.h"
#include "dataset/transfer.h"

namespace hpctrain {

struct LoaderOptions {
  int64_t batch_size = 64;
  int prefetch = 2;            // batches assembled ahead by the background thread; 0 = synchronous
  int64_t in_memory_mb = 512;  // a file up to this size is read whole at its first batch (h5_dataset.h)
  bool shuffle = true;
  bool drop_last = false;  // sampler: trim (true) or pad with marked duplicates (false)
  bool augment = false;    // random crop (padding augment_pad) + horizontal flip
  int64_t augment_pad = 2;
  uint64_t seed = 0;
  c10::Device device = c10::kCPU;
  std::string images = "images", labels = "labels";
  bool regression = false;       // read `labels` as the float target dataset (e.g. "targets")
  std::vector<float> mean, std;  // empty: the file's (training set's) values
  int64_t seq_len = 0;           // token data: tokens per window (dataset/token_source.h)
  bool lazy_tokens = false;      // token data: ids of a stream not read whole checked per batch only
  int64_t vocab_size = 0;        // nanoGPT .bin data: its vocabulary (dataset/nanogpt_bin.h)
};

class Loader {
 public:
  Loader(std::string path, int world, int rank, LoaderOptions opts);
  // One data set from several files, in order (split_files() finds DIR/train-NNNNN.h5).
  Loader(const std::vector<std::string>& files, int world, int rank, LoaderOptions opts);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Batches of the current share (of a whole epoch unless started mid-epoch by start_at).
  int64_t batches_per_epoch() const;
  // Starts epoch `epoch` (reshuffled) at batch `first_batch` of this world's share.
  void start_epoch(int64_t epoch, int64_t first_batch = 0);
  // Starts from a position saved in any world size (sampler.h explains the mapping); batch
  // indices then count from 0 within the remaining share.
  void start_at(const SamplerPosition& p);
  // The next batch of the epoch, or nullopt at its end.
  std::optional<Batch> next();
  // Where a resume should continue after the batches next() has returned so far.
  SamplerPosition position() const;
  double data_wait_seconds() const { return wait_seconds_; }
  const DatasetInfo& info() const { return dataset_.info(); }
  const DistributedSampler& sampler() const { return sampler_; }
  const LoaderOptions& options() const { return opts_; }

 private:
  struct Pending {
    Batch batch;
    std::shared_ptr<void> ready;
  };
  Batch assemble(int64_t b) const;
  Batch assemble_tokens(int64_t b, const std::vector<int64_t>& sorted, const std::vector<int64_t>& order,
                        const std::vector<bool>& valid) const;
  void produce(int64_t first, int64_t end);
  void stop();
  // Sets the batch range [first, batches_per_epoch()) and starts the producer if prefetching.
  void launch(int64_t first);

  LoaderOptions opts_;
  DataSource dataset_;  // opened (validated) by the constructor
  DistributedSampler sampler_;
  BatchMover mover_;
  std::vector<float> mean_, std_;
  int64_t next_batch_ = 0, end_batch_ = 0;

  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool stop_ = false, done_ = false;
  std::exception_ptr error_;
  double wait_seconds_ = 0;
};

}  // namespace hpctrain
