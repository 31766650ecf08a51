// DataSource: split_files finds DIR/<split>.h5 or the numbered files (gaps are an error); reads
// split the ascending global indices by file (upper_bound on each file's first index) and read
// each file's part once.
#include "dataset/data_source.h"

#include <algorithm>
#include <filesystem>
#include <regex>

#include "dataset/h5_dataset.h"
#include "dataset/nanogpt_bin.h"
#include "dataset/token_source.h"
#include "runtime/check.h"

namespace hpctrain {
namespace {

std::string dims(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string numbered(const std::string& dir, const std::string& split, int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "-%05d.h5", i);
  return dir + "/" + split + buf;
}

}  // namespace

std::vector<std::string> split_files(const std::string& dir, const std::string& split) {
  namespace fs = std::filesystem;
  const std::string single = dir + "/" + split + ".h5";
  std::error_code ec;
  std::vector<int> found;
  if (fs::is_directory(dir, ec)) {
    const std::regex pat(split + "-([0-9]{5})\\.h5");
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      std::smatch m;
      std::string name = e.path().filename().string();
      if (std::regex_match(name, m, pat)) found.push_back(std::stoi(m[1]));
    }
  }
  if (is_nanogpt_dir(dir)) {
    const std::string bin = dir + "/" + (split == "test" ? "val" : split) + ".bin";
    if (!found.empty() || fs::exists(single))
      throw Error("data directory " + dir + " has both nanoGPT's train.bin and " + split +
                  " .h5 files: keep one form");
    return {bin};
  }
  if (found.empty()) return {single};  // H5Dataset::open reports a missing file
  if (fs::exists(single))
    throw Error("data directory " + dir + " has both " + split + ".h5 and " + split + "-NNNNN.h5 files: keep one form");
  std::sort(found.begin(), found.end());
  std::vector<std::string> files;
  for (int i = 0; i <= found.back(); ++i) {
    if (!std::binary_search(found.begin(), found.end(), i))
      throw Error("multi-file data set " + dir + "/" + split + "-*.h5: " + numbered(dir, split, i) +
                  " is missing (files must be numbered from 00000 without gaps; found up to " +
                  numbered(dir, split, found.back()) + ")");
    files.push_back(numbered(dir, split, i));
  }
  return files;
}

DataSource::DataSource(const std::vector<std::string>& files, const DataSourceOptions& o) {
  if (is_nanogpt_bin(files.at(0)) || is_token_file(files[0])) {
    tokens_ = std::make_unique<TokenSource>(files, o.seq_len, o.in_memory_max, o.lazy_tokens, o.vocab_size);
    info_ = tokens_->info();
    return;
  }
  if (o.seq_len > 0 && std::filesystem::exists(files[0]))
    throw Error("--seq-len " + std::to_string(o.seq_len) + " is for token data, but " + files[0] +
                " has no 'tokens' dataset (it is read as inputs '" + o.inputs + "' and targets '" + o.targets + "')");
  int64_t total = 0, classes = 0;
  for (const auto& f : files) {
    auto ds = std::make_unique<H5Dataset>(H5Dataset::open(f, o.inputs, o.targets, 0, o.regression, o.in_memory_max));
    const DatasetInfo& fi = ds->info();
    if (!files_.empty()) {
      const DatasetInfo& a = files_[0]->info();
      auto differ = [&](const std::string& what, const std::string& x, const std::string& y) {
        throw Error("multi-file data set: " + f + " has " + what + " " + y + " but " + a.path + " has " + x);
      };
      if (fi.input_dtype != a.input_dtype) differ("input dtype", a.input_dtype, fi.input_dtype);
      if (fi.sample_shape != a.sample_shape) differ("sample shape", dims(a.sample_shape), dims(fi.sample_shape));
      if (fi.target_shape != a.target_shape) differ("target shape", dims(a.target_shape), dims(fi.target_shape));
    }
    start_.push_back(total);
    total += fi.size;
    classes = std::max(classes, fi.num_classes);
    files_.push_back(std::move(ds));
  }
  info_ = files_[0]->info();
  info_.size = total;
  info_.num_classes = info_.classification ? classes : 0;
}

DataSource::~DataSource() = default;
DataSource::DataSource(DataSource&&) noexcept = default;

int64_t DataSource::label(int64_t i) const {
  size_t f = size_t(std::upper_bound(start_.begin(), start_.end(), i) - start_.begin()) - 1;
  return files_[f]->labels()[size_t(i - start_[f])];
}

// Splits the ascending global indices by file and lets `fn(file, local_sorted, out)` read each
// file's part into its place.
template <class Fn>
void DataSource::per_file(const std::vector<int64_t>& sorted, int64_t row, float* out, Fn&& fn) const {
  size_t k = 0;
  while (k < sorted.size()) {
    size_t f = size_t(std::upper_bound(start_.begin(), start_.end(), sorted[k]) - start_.begin()) - 1;
    const int64_t end = f + 1 < start_.size() ? start_[f + 1] : info_.size;
    std::vector<int64_t> local;
    size_t first = k;
    while (k < sorted.size() && sorted[k] < end) local.push_back(sorted[k++] - start_[f]);
    fn(*files_[f], local, out + first * row);
  }
}

void DataSource::read_tokens(const std::vector<int64_t>& sorted, int64_t* inputs, int64_t* targets) const {
  if (!tokens_) throw Error(info_.path + ": not a token data set");
  tokens_->read(sorted, inputs, targets);
}

void DataSource::read(const std::vector<int64_t>& sorted, float* out) const {
  per_file(sorted, info_.sample_numel(), out,
           [](const H5Dataset& d, const std::vector<int64_t>& l, float* o) { d.read(l, o); });
}

void DataSource::read_targets(const std::vector<int64_t>& sorted, float* out) const {
  per_file(sorted, info_.target_numel(), out,
           [](const H5Dataset& d, const std::vector<int64_t>& l, float* o) { d.read_targets(l, o); });
}

}  // namespace hpctrain
