// TokenSource: validates each token file at open (dataset, dtype, vocab_size, length), reads a
// stream that fits the in-memory budget whole (in 16 Mi-token chunks, every id checked), else
// streams it once for a min/max check (unless lazy) and reads a batch's windows with one H5Dread
// over the union of their token ranges (consecutive windows share one range), checking the ids
// read.
#include "dataset/token_source.h"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <type_traits>

#include "dataset/h5_dataset.h"
#include "dataset/nanogpt_bin.h"
#include "dataset/prep/token_writer.h"
#include "io/h5_util.h"
#include "runtime/check.h"

namespace hpctrain {

struct TokenSource::File {
  std::string path;
  h5::Handle file, tokens;
  int64_t length = 0, windows = 0, vocab = 0;
  std::vector<int32_t> cache;  // the whole stream, when it fits the budget
  std::unique_ptr<MappedTokens> mapped;  // a nanoGPT .bin file (nanogpt_bin.h), never cached
  int64_t reserved = 0;
  ~File() {
    if (reserved) release_in_memory(reserved);
  }
};

namespace {

constexpr int64_t kChunkTokens = int64_t{16} << 20;

std::string id_error(const std::string& path, int64_t pos, int64_t id, int64_t vocab) {
  return path + ": token id " + std::to_string(id) + " at position " + std::to_string(pos) + " is outside [0, " +
         std::to_string(vocab) + ") (vocab_size " + std::to_string(vocab) + ")";
}

// Reads tokens [start, start + n) of `ds` as int64 (caller holds h5::lock()).
void read_range(hid_t ds, int64_t start, int64_t n, int64_t* out, const std::string& path) {
  h5::Handle fspace(H5Dget_space(ds));
  hsize_t s = hsize_t(start), c = hsize_t(n);
  hsize_t m = c;
  h5::Handle mspace(H5Screate_simple(1, &m, nullptr));
  if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &s, nullptr, &c, nullptr) < 0 ||
      H5Dread(ds, H5T_NATIVE_INT64, mspace.get(), fspace.get(), H5P_DEFAULT, out) < 0)
    throw Error(path + ": reading 'tokens' failed (corrupt or truncated file)");
}

// Scans tokens [0, length) of `ds` in chunks of its stored type T (memory type `mem`): the first
// position whose id is outside [0, vocab), its value in *value, or -1. Per chunk a min/max pass
// (vectorizes); the position is looked for only in a chunk that has a bad id.
template <class T>
int64_t first_bad_id(hid_t ds, hid_t mem, int64_t length, int64_t vocab, const std::string& path, int64_t* value) {
  constexpr int64_t kScanTokens = int64_t{4} << 20;
  std::vector<T> buf(size_t(std::min(kScanTokens, length)));
  for (int64_t at = 0; at < length; at += kScanTokens) {
    const int64_t n = std::min(kScanTokens, length - at);
    {
      auto g = h5::lock();
      h5::silence_errors();
      h5::Handle fspace(H5Dget_space(ds));
      hsize_t s = hsize_t(at), c = hsize_t(n);
      h5::Handle mspace(H5Screate_simple(1, &c, nullptr));
      if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &s, nullptr, &c, nullptr) < 0 ||
          H5Dread(ds, mem, mspace.get(), fspace.get(), H5P_DEFAULT, buf.data()) < 0)
        throw Error(path + ": reading 'tokens' failed (corrupt or truncated file)");
    }
    T lo = buf[0], hi = buf[0];
    for (int64_t i = 0; i < n; ++i) {
      lo = std::min(lo, buf[size_t(i)]);
      hi = std::max(hi, buf[size_t(i)]);
    }
    const bool bad_lo = std::is_signed_v<T> && int64_t(lo) < 0;
    const bool bad_hi = std::is_signed_v<T> ? int64_t(hi) >= vocab : uint64_t(hi) >= uint64_t(vocab);
    if (!bad_lo && !bad_hi) continue;
    for (int64_t i = 0; i < n; ++i) {
      const T v = buf[size_t(i)];
      if ((std::is_signed_v<T> && int64_t(v) < 0) || uint64_t(v) >= uint64_t(vocab)) {
        // (An unsigned 64-bit id past INT64_MAX is named as a negative number.)
        *value = int64_t(v);
        return at + i;
      }
    }
  }
  return -1;
}

// Streams `ds` once and throws the first id outside [0, vocab) (see first_bad_id). A type that
// cannot hold an id >= vocab (unsigned, 2^bits <= vocab) needs no pass.
void check_stream(hid_t ds, int64_t length, int64_t vocab, const std::string& path) {
  size_t size = 0;
  bool is_signed = false;
  {
    auto g = h5::lock();
    h5::Handle type(H5Dget_type(ds));
    size = H5Tget_size(type.get());
    is_signed = H5Tget_sign(type.get()) == H5T_SGN_2;
  }
  if (!is_signed && size < 8 && (int64_t{1} << (8 * size)) <= vocab) return;
  int64_t value = 0, pos = -1;
  switch (is_signed ? -int(size) : int(size)) {
    case 1: pos = first_bad_id<uint8_t>(ds, H5T_NATIVE_UINT8, length, vocab, path, &value); break;
    case 2: pos = first_bad_id<uint16_t>(ds, H5T_NATIVE_UINT16, length, vocab, path, &value); break;
    case 4: pos = first_bad_id<uint32_t>(ds, H5T_NATIVE_UINT32, length, vocab, path, &value); break;
    case 8: pos = first_bad_id<uint64_t>(ds, H5T_NATIVE_UINT64, length, vocab, path, &value); break;
    case -1: pos = first_bad_id<int8_t>(ds, H5T_NATIVE_INT8, length, vocab, path, &value); break;
    case -2: pos = first_bad_id<int16_t>(ds, H5T_NATIVE_INT16, length, vocab, path, &value); break;
    case -4: pos = first_bad_id<int32_t>(ds, H5T_NATIVE_INT32, length, vocab, path, &value); break;
    default: pos = first_bad_id<int64_t>(ds, H5T_NATIVE_INT64, length, vocab, path, &value); break;
  }
  if (pos >= 0) throw Error(id_error(path, pos, value, vocab));
}

}  // namespace

// A nanoGPT .bin file: mapped, its ids checked once unless lazy.
void TokenSource::open_bin(File& f, int64_t vocab, bool lazy) {
  if (vocab < 1 || vocab > INT32_MAX)
    throw Error(f.path + ": a nanoGPT token file needs its vocabulary size: meta.pkl with vocab_size next to it, or "
                         "--vocab-size N");
  f.mapped = std::make_unique<MappedTokens>(f.path);
  f.length = f.mapped->length();
  f.vocab = vocab;
  int64_t value = 0;
  const int64_t pos = lazy ? -1 : f.mapped->first_bad_id(vocab, &value);
  if (pos >= 0) throw Error(id_error(f.path, pos, value, vocab));
}

bool is_token_file(const std::string& path) {
  auto g = h5::lock();
  h5::silence_errors();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec) || H5Fis_hdf5(path.c_str()) <= 0) return false;
  h5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  return f.valid() && H5Lexists(f.get(), "tokens", H5P_DEFAULT) > 0;
}

TokenSource::TokenSource(const std::vector<std::string>& paths, int64_t seq_len, int64_t in_memory_max, bool lazy,
                         int64_t bin_vocab) {
  if (seq_len < 1)
    throw Error(paths.at(0) + " holds a token stream: pass --seq-len T (the tokens per training window; TOML seq_len)");
  int64_t total_windows = 0, total_tokens = 0;
  for (const auto& path : paths) {
    auto f = std::make_unique<File>();
    f->path = path;
    if (is_nanogpt_bin(path)) {
      open_bin(*f, bin_vocab, lazy);
      if (files_.empty()) {
        info_.vocab_size = f->vocab;
        info_.input_dtype = "uint16";
      }
    } else {
      auto g = h5::lock();
      h5::silence_errors();
      if (!std::filesystem::exists(path)) throw Error("data file " + path + " does not exist");
      if (H5Fis_hdf5(path.c_str()) <= 0) throw Error(path + " is not an HDF5 file");
      f->file = h5::Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
      if (!f->file.valid()) throw Error(path + ": cannot open as HDF5 (corrupt or truncated file)");
      if (H5Lexists(f->file.get(), "tokens", H5P_DEFAULT) <= 0)
        throw Error(path + ": dataset 'tokens' not found (the other files of this data set are token streams)");
      f->tokens = h5::Handle(H5Dopen2(f->file.get(), "tokens", H5P_DEFAULT));
      if (!f->tokens.valid()) throw Error(path + ": 'tokens' is not a readable dataset");
      h5::Handle type(H5Dget_type(f->tokens.get()));
      if (H5Tget_class(type.get()) != H5T_INTEGER)
        throw Error(path + ": dataset 'tokens' has dtype " + h5::type_name(type.get()) +
                    "; token ids must be integers (uint8, uint16, int32 or int64)");
      h5::Handle space(H5Dget_space(f->tokens.get()));
      const int rank = H5Sget_simple_extent_ndims(space.get());
      hsize_t dims[H5S_MAX_RANK] = {0};
      if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims, nullptr);
      if (rank != 1)
        throw Error(path + ": dataset 'tokens' has " + std::to_string(rank) +
                    " dimensions; a token stream is 1-D (one stream per file)");
      f->length = int64_t(dims[0]);
      if (!h5::read_attr_int64(f->file.get(), "vocab_size", &f->vocab))
        throw Error(path + ": no integer attribute 'vocab_size' (the number of token ids, e.g. 256 for bytes)");
      if (f->vocab < 1 || f->vocab > INT32_MAX)
        throw Error(path + ": vocab_size " + std::to_string(f->vocab) + " is out of range [1, 2147483647]");
      std::string tokenizer;
      h5::read_attr_string(f->file.get(), "tokenizer", &tokenizer);
      int64_t text_bytes = 0;  // -1 in info_: some file has none
      const bool known = h5::read_attr_int64(f->file.get(), "text_bytes", &text_bytes);
      if (files_.empty() || info_.text_bytes >= 0) info_.text_bytes = known ? info_.text_bytes + text_bytes : -1;
      if (files_.empty()) {
        info_.vocab_size = f->vocab;
        info_.tokenizer = tokenizer;
        info_.input_dtype = h5::type_name(type.get());
      } else if (f->vocab != info_.vocab_size) {
        throw Error("multi-file token data set: " + path + " has vocab_size " + std::to_string(f->vocab) + " but " +
                    paths[0] + " has " + std::to_string(info_.vocab_size));
      }
    }
    if (f->length == 0)
      throw Error(path + ": dataset 'tokens' is empty (0 tokens; a training window needs seq_len + 1 = " +
                  std::to_string(seq_len + 1) + ")");
    f->windows = (f->length - 1) / seq_len;
    if (f->windows < 1)
      throw Error("--seq-len " + std::to_string(seq_len) + " is larger than " + path + "'s stream of " +
                  std::to_string(f->length) + " tokens (a window needs seq_len + 1 tokens)");
    const int64_t bytes = 4 * f->length;
    if (f->mapped) {
      // read per batch from the mapping (checked at open unless lazy)
    } else if (bytes <= in_memory_max && reserve_in_memory(bytes)) {
      f->reserved = bytes;
      f->cache.resize(size_t(f->length));
      std::vector<int64_t> chunk;
      for (int64_t at = 0; at < f->length; at += kChunkTokens) {
        const int64_t n = std::min(kChunkTokens, f->length - at);
        chunk.resize(size_t(n));
        {
          auto g = h5::lock();
          h5::silence_errors();
          read_range(f->tokens.get(), at, n, chunk.data(), path);
        }
        for (int64_t i = 0; i < n; ++i) {
          if (chunk[i] < 0 || chunk[i] >= f->vocab) throw Error(id_error(path, at + i, chunk[i], f->vocab));
          f->cache[size_t(at + i)] = int32_t(chunk[i]);
        }
      }
    } else if (!lazy) {
      check_stream(f->tokens.get(), f->length, f->vocab, path);
    }
    start_.push_back(total_windows);
    total_windows += f->windows;
    total_tokens += f->length;
    files_.push_back(std::move(f));
  }
  info_.path = paths.at(0);
  info_.text_bytes = std::max<int64_t>(info_.text_bytes, 0);
  if (!info_.tokenizer.empty() && info_.tokenizer != "bytes") info_.tokenizer_model = read_tokenizer_model(paths[0]);
  info_.tokens = true;
  info_.seq_len = seq_len;
  info_.size = total_windows;
  info_.token_count = total_tokens;
  info_.sample_shape = {seq_len};
  info_.target_shape = {seq_len};
  info_.classification = true;
  info_.num_classes = info_.vocab_size;
  info_.uint8_pixels = false;
  info_.mean = {0.f};
  info_.std = {1.f};
}

TokenSource::~TokenSource() = default;
TokenSource::TokenSource(TokenSource&&) noexcept = default;

void TokenSource::read(const std::vector<int64_t>& sorted, int64_t* inputs, int64_t* targets) const {
  const int64_t t = info_.seq_len;
  size_t k = 0;
  while (k < sorted.size()) {
    if (sorted[k] < 0 || sorted[k] >= info_.size)
      throw Error(info_.path + ": window index " + std::to_string(sorted[k]) + " out of range [0, " +
                  std::to_string(info_.size) + ")");
    const size_t fi = size_t(std::upper_bound(start_.begin(), start_.end(), sorted[k]) - start_.begin()) - 1;
    const File& f = *files_[fi];
    const int64_t end = start_[fi] + f.windows;
    std::vector<int64_t> local;  // this file's windows, ascending
    const size_t first = k;
    while (k < sorted.size() && sorted[k] < end) local.push_back(sorted[k++] - start_[fi]);
    auto put = [&](size_t slot, const int64_t* w) {  // w: the window's T + 1 tokens
      std::copy_n(w, t, inputs + slot * t);
      std::copy_n(w + 1, t, targets + slot * t);
    };
    if (f.mapped) {
      std::vector<int64_t> w(size_t(t + 1));
      for (size_t i = 0; i < local.size(); ++i) {
        const uint16_t* src = f.mapped->ids() + local[i] * t;
        for (int64_t q = 0; q <= t; ++q) {
          if (src[q] >= f.vocab) throw InputError(id_error(f.path, local[i] * t + q, src[q], f.vocab));
          w[size_t(q)] = src[q];
        }
        put(first + i, w.data());
      }
      continue;
    }
    if (!f.cache.empty()) {
      std::vector<int64_t> w(size_t(t + 1));
      for (size_t i = 0; i < local.size(); ++i) {
        const int32_t* src = f.cache.data() + local[i] * t;
        std::copy_n(src, t + 1, w.begin());
        put(first + i, w.data());
      }
      continue;
    }
    // Runs of consecutive windows k..m cover tokens [kT, mT + T + 1): one hyperslab each, one read.
    std::vector<int64_t> uniq(local);
    uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
    std::vector<int64_t> offset(uniq.size());  // where each unique window starts in the buffer
    std::vector<int64_t> buf;
    {
      auto g = h5::lock();
      h5::silence_errors();
      h5::Handle fspace(H5Dget_space(f.tokens.get()));
      H5Sselect_none(fspace.get());
      int64_t total = 0;
      for (size_t i = 0; i < uniq.size();) {
        size_t j = i + 1;
        while (j < uniq.size() && uniq[j] == uniq[j - 1] + 1) ++j;
        hsize_t s = hsize_t(uniq[i] * t), c = hsize_t((uniq[j - 1] - uniq[i]) * t + t + 1);
        if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_OR, &s, nullptr, &c, nullptr) < 0)
          throw Error(f.path + ": selecting tokens failed");
        for (size_t q = i; q < j; ++q) offset[q] = total + (uniq[q] - uniq[i]) * t;
        total += int64_t(c);
        i = j;
      }
      buf.resize(size_t(total));
      hsize_t m = hsize_t(total);
      h5::Handle mspace(H5Screate_simple(1, &m, nullptr));
      if (H5Dread(f.tokens.get(), H5T_NATIVE_INT64, mspace.get(), fspace.get(), H5P_DEFAULT, buf.data()) < 0)
        throw Error(f.path + ": reading 'tokens' failed (corrupt or truncated file)");
    }
    size_t u = 0;
    for (size_t i = 0; i < local.size(); ++i) {
      while (uniq[u] != local[i]) ++u;
      const int64_t* w = buf.data() + offset[u];
      for (int64_t q = 0; q <= t; ++q)
        if (w[q] < 0 || w[q] >= f.vocab) throw InputError(id_error(f.path, local[i] * t + q, w[q], f.vocab));
      put(first + i, w);
    }
  }
}

}  // namespace hpctrain
