// Loader: a batch reads its samples in ascending index order (one coalesced read), then puts
// each in its slot, augments and normalizes it; with prefetch a named thread fills a bounded
// queue and next() rethrows its error. BatchMover moves each batch to the device.
#include "dataset/loader.h"

#include <ATen/ATen.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "dataset/h5_dataset.h"
#include "dataset/transform.h"
#include "runtime/check.h"

namespace hpctrain {

namespace {
DataSourceOptions source_options(const LoaderOptions& o) {
  DataSourceOptions d;
  d.inputs = o.images;
  d.targets = o.labels;
  d.regression = o.regression;
  d.in_memory_max = o.in_memory_mb << 20;
  d.seq_len = o.seq_len;
  d.lazy_tokens = o.lazy_tokens;
  d.vocab_size = o.vocab_size;
  return d;
}
}  // namespace

Loader::Loader(std::string path, int world, int rank, LoaderOptions opts)
    : Loader(std::vector<std::string>{std::move(path)}, world, rank, std::move(opts)) {}

Loader::Loader(const std::vector<std::string>& files, int world, int rank, LoaderOptions opts)
    : opts_(std::move(opts)),
      dataset_(files, source_options(opts_)),
      sampler_(dataset_.info().size, world, rank, opts_.shuffle, opts_.seed, opts_.drop_last),
      mover_(opts_.device) {
  if (opts_.batch_size <= 0) throw Error("loader: batch size must be positive");
  if (opts_.prefetch < 0) throw Error("loader: prefetch must be >= 0");
  const auto& inf = dataset_.info();
  const std::string path = inf.path;
  if (inf.tokens) {
    if (opts_.augment) throw Error("loader: augmentation is for images; " + path + " is a token stream");
    start_epoch(0);
    return;
  }
  const int64_t c = inf.sample_shape[0];
  mean_ = opts_.mean.empty() ? inf.mean : opts_.mean;
  std_ = opts_.std.empty() ? inf.std : opts_.std;
  if (int64_t(mean_.size()) != c || int64_t(std_.size()) != c)
    throw Error("loader: " + path + " has " + std::to_string(c) + " channels but mean/std have " +
                std::to_string(mean_.size()) + "/" + std::to_string(std_.size()) + " values");
  for (float s : std_)
    if (!(s > 0)) throw Error("loader: std values must be positive (" + path + ")");
  if (opts_.augment && inf.sample_shape.size() != 3)
    throw Error("loader: augmentation needs C,H,W samples; " + path + " has " +
                std::to_string(inf.sample_shape.size()) + " sample dims");
  start_epoch(0);
}

Loader::~Loader() { stop(); }

int64_t Loader::batches_per_epoch() const { return sampler_.num_batches(opts_.batch_size); }

void Loader::start_epoch(int64_t epoch, int64_t first_batch) {
  stop();
  sampler_.set_epoch(epoch);
  launch(std::clamp<int64_t>(first_batch, 0, batches_per_epoch()));
}

void Loader::launch(int64_t first) {
  next_batch_ = first;
  end_batch_ = batches_per_epoch();
  if (opts_.prefetch > 0) {
    stop_ = done_ = false;
    error_ = nullptr;
    worker_ = std::thread([this, b = next_batch_, e = end_batch_] {
      pthread_setname_np(pthread_self(), "hpc-loader");  // named for per-thread profiles
      produce(b, e);
    });
  }
}

void Loader::start_at(const SamplerPosition& p) {
  stop();
  sampler_.set_position(p);
  launch(0);
}

SamplerPosition Loader::position() const { return sampler_.position_after(next_batch_, opts_.batch_size); }

void Loader::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  queue_.clear();
}

Batch Loader::assemble(int64_t b) const {
  std::vector<bool> valid;
  const std::vector<int64_t> idx = sampler_.batch(b, opts_.batch_size, &valid);
  const int64_t n = int64_t(idx.size());
  const auto& inf = dataset_.info();
  const int64_t numel = inf.sample_numel();
  // Read in ascending index order (one coalesced H5Dread), then put each sample in its slot.
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return idx[a] < idx[c]; });
  std::vector<int64_t> sorted(n);
  for (int64_t k = 0; k < n; ++k) sorted[k] = idx[order[k]];
  if (inf.tokens) return assemble_tokens(b, sorted, order, valid);
  std::vector<float> raw(size_t(n * numel));
  dataset_.read(sorted, raw.data());

  std::vector<int64_t> shape = {n};
  shape.insert(shape.end(), inf.sample_shape.begin(), inf.sample_shape.end());
  Batch out;
  out.images = at::empty(shape, at::kFloat);
  std::vector<int64_t> tshape = {n};
  tshape.insert(tshape.end(), inf.target_shape.begin(), inf.target_shape.end());
  out.labels = inf.classification ? at::empty({n}, at::kLong) : at::empty(tshape, at::kFloat);
  std::vector<float> traw;
  const int64_t tnumel = inf.target_numel();
  if (!inf.classification) {
    traw.resize(size_t(n * tnumel));
    dataset_.read_targets(sorted, traw.data());
  }
  out.valid = at::empty({n}, at::kBool);
  out.epoch = sampler_.epoch();
  out.index = b;
  float* img = out.images.data_ptr<float>();
  int64_t* lab = inf.classification ? out.labels.data_ptr<int64_t>() : nullptr;
  float* tgt = inf.classification ? nullptr : out.labels.data_ptr<float>();
  bool* val = out.valid.data_ptr<bool>();
  const int64_t c = inf.sample_shape[0], plane = numel / c;
  const float scale = inf.uint8_pixels ? 1.f / 255.f : 1.f;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t slot = order[k];
    float* x = img + slot * numel;
    std::copy_n(raw.data() + k * numel, numel, x);
    if (opts_.augment)
      augment_sample(x, c, inf.sample_shape[1], inf.sample_shape[2], opts_.augment_pad,
                     sample_seed(opts_.seed, sampler_.epoch(), sorted[k]));
    normalize_sample(x, c, plane, scale, mean_, std_);
    if (lab)
      lab[slot] = dataset_.label(sorted[k]);
    else
      std::copy_n(traw.data() + k * tnumel, tnumel, tgt + slot * tnumel);
    val[slot] = valid[slot];
  }
  return out;
}

// Token windows: read in ascending order, then each window's inputs and targets go to its slot.
Batch Loader::assemble_tokens(int64_t b, const std::vector<int64_t>& sorted, const std::vector<int64_t>& order,
                              const std::vector<bool>& valid) const {
  const int64_t n = int64_t(sorted.size()), t = dataset_.info().seq_len;
  std::vector<int64_t> in(size_t(n * t)), tg(size_t(n * t));
  dataset_.read_tokens(sorted, in.data(), tg.data());
  Batch out;
  out.images = at::empty({n, t}, at::kLong);
  out.labels = at::empty({n, t}, at::kLong);
  out.valid = at::empty({n}, at::kBool);
  out.epoch = sampler_.epoch();
  out.index = b;
  int64_t* x = out.images.data_ptr<int64_t>();
  int64_t* y = out.labels.data_ptr<int64_t>();
  bool* val = out.valid.data_ptr<bool>();
  for (int64_t k = 0; k < n; ++k) {
    const int64_t slot = order[k];
    std::copy_n(in.data() + k * t, t, x + slot * t);
    std::copy_n(tg.data() + k * t, t, y + slot * t);
    val[slot] = valid[slot];
  }
  return out;
}

void Loader::produce(int64_t first, int64_t end) {
  try {
    for (int64_t b = first; b < end; ++b) {
      {
        std::unique_lock<std::mutex> g(mu_);
        cv_.wait(g, [&] { return stop_ || int64_t(queue_.size()) < opts_.prefetch; });
        if (stop_) return;
      }
      Pending p;
      p.batch = assemble(b);
      p.ready = mover_.start(p.batch);
      {
        std::lock_guard<std::mutex> g(mu_);
        queue_.push_back(std::move(p));
      }
      cv_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> g(mu_);
    error_ = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    done_ = true;
  }
  cv_.notify_all();
}

std::optional<Batch> Loader::next() {
  if (next_batch_ >= end_batch_) return std::nullopt;
  const auto t0 = std::chrono::steady_clock::now();
  Pending p;
  if (opts_.prefetch == 0) {
    p.batch = assemble(next_batch_);
    p.ready = mover_.start(p.batch);
  } else {
    std::unique_lock<std::mutex> g(mu_);
    cv_.wait(g, [&] { return !queue_.empty() || done_; });
    if (queue_.empty()) {
      if (error_) std::rethrow_exception(error_);
      throw Error("loader: background thread ended before batch " + std::to_string(next_batch_));
    }
    p = std::move(queue_.front());
    queue_.pop_front();
    g.unlock();
    cv_.notify_all();
  }
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  mover_.finish(p.batch, p.ready);
  ++next_batch_;
  return std::move(p.batch);
}

}  // namespace hpctrain
