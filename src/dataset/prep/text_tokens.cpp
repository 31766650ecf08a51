// write_text_tokens: collect text files (dedupe by canonical path, skip binaries), split each
// file's bytes train/test by the fraction, and write the pair under temporary names.
#include "dataset/prep/text_tokens.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "dataset/prep/h5_writer.h"
#include "dataset/prep/token_writer.h"
#include "io/h5_util.h"
#include "runtime/check.h"

namespace hpctrain {
namespace fs = std::filesystem;

bool is_utf8_text(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    unsigned c = p[i];
    if (c == 0) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
    if (!len || (c >= 0xF5) || i + len > n) return false;
    for (int k = 1; k < len; ++k)
      if ((p[i + k] & 0xC0) != 0x80) return false;
    if (len == 3 && ((c == 0xE0 && p[i + 1] < 0xA0) || (c == 0xED && p[i + 1] >= 0xA0))) return false;
    if (len == 4 && ((c == 0xF0 && p[i + 1] < 0x90) || (c == 0xF4 && p[i + 1] >= 0x90))) return false;
    i += len;
  }
  return true;
}

void write_byte_tokens_h5(const std::string& path, const std::vector<uint8_t>& tokens, const std::string& source) {
  auto g = h5::lock();
  h5::silence_errors();
  h5::Handle f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!f.valid()) throw Error("cannot create HDF5 file " + path);
  auto fail = [&](const char* what) { throw Error("writing " + path + ": " + what + " failed"); };
  hsize_t n = tokens.size();
  h5::Handle sp(H5Screate_simple(1, &n, nullptr));
  h5::Handle ds(H5Dcreate2(f.get(), "tokens", H5T_STD_U8LE, sp.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!ds.valid()) fail("creating tokens");
  if (n && H5Dwrite(ds.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, tokens.data()) < 0)
    fail("writing tokens");
  h5::write_attr_int64(f.get(), "vocab_size", 256);
  h5::write_attr_string(f.get(), "tokenizer", "bytes");
  h5::write_attr_int64(f.get(), "text_bytes", int64_t(tokens.size()));
  h5::write_attr_string(f.get(), "source", source);
  if (H5Fflush(f.get(), H5F_SCOPE_GLOBAL) < 0) fail("flushing");
}

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error("cannot read " + p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error("cannot read " + p.string());
  return ss.str();
}

}  // namespace

TextTokensReport write_text_tokens(const std::vector<std::string>& inputs, const std::string& out_dir,
                                   double test_fraction, const Tokenizer& tokenizer) {
  if (!(test_fraction > 0 && test_fraction < 1))
    throw Error("--test-fraction " + std::to_string(test_fraction) + " must be in (0, 1)");
  if (inputs.empty()) throw Error("data text: no input files or directories");
  TextTokensReport rep;
  std::vector<uint8_t> train, test;
  std::set<std::string> seen;
  auto add = [&](const fs::path& p, bool named) {
    std::error_code ec;
    std::string canon = fs::canonical(p, ec).string();
    if (ec) throw Error("data text: " + p.string() + ": " + ec.message());
    if (!seen.insert(canon).second) {
      rep.skipped.push_back(p.string() + " (already read as " + canon + ")");
      return;
    }
    std::string bytes = read_all(p);
    if (!is_utf8_text(bytes)) {
      if (named) throw Error("data text: " + p.string() + " is not UTF-8 text (a NUL byte or an invalid sequence)");
      rep.skipped.push_back(p.string() + " (not UTF-8 text)");
      return;
    }
    const size_t n_test = size_t(double(bytes.size()) * test_fraction);
    const size_t n_train = bytes.size() - n_test;
    train.insert(train.end(), bytes.begin(), bytes.begin() + n_train);
    test.insert(test.end(), bytes.begin() + n_train, bytes.end());
    ++rep.files;
  };
  for (const auto& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<fs::path> files;
      for (auto it = fs::recursive_directory_iterator(in, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec))
        if (it->is_regular_file(ec)) files.push_back(it->path());
      if (ec) throw Error("data text: cannot list " + in + ": " + ec.message());
      // Files under their own names first, then symlinks (read only when they point elsewhere).
      std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
        std::error_code e1, e2;
        bool la = fs::is_symlink(a, e1), lb = fs::is_symlink(b, e2);
        return la != lb ? lb : a < b;
      });
      for (const auto& f : files) add(f, false);
    } else if (fs::is_regular_file(in, ec)) {
      add(in, true);
    } else {
      throw Error("data text: " + in + " is not a file or directory");
    }
  }
  if (rep.files == 0) throw Error("data text: no UTF-8 text files in the inputs");
  if (train.size() < 2 || test.size() < 2)
    throw Error("data text: too little text (" + std::to_string(train.size()) + " train / " +
                std::to_string(test.size()) + " test bytes)");
  rep.train_tokens = rep.train_bytes = int64_t(train.size());
  rep.test_tokens = rep.test_bytes = int64_t(test.size());

  const std::string source = "hpctrain data text: " + std::to_string(rep.files) + " file(s), last " +
                             std::to_string(test_fraction) + " of each to test";
  if (tokenizer.name() == "bytes") {
    write_split_pair(out_dir, [&](const std::string& path, bool is_train) {
      write_byte_tokens_h5(path, is_train ? train : test, source);
    });
    return rep;
  }
  const std::string train_text(train.begin(), train.end()), test_text(test.begin(), test.end());
  const std::vector<int64_t> train_ids = tokenizer.encode(train_text), test_ids = tokenizer.encode(test_text);
  rep.train_tokens = int64_t(train_ids.size());
  rep.test_tokens = int64_t(test_ids.size());
  if (train_ids.size() < 2 || test_ids.size() < 2)
    throw Error("data text: too little text (" + std::to_string(train_ids.size()) + " train / " +
                std::to_string(test_ids.size()) + " test tokens)");
  const std::string back = tokenizer.decode(train_ids);
  if (back != train_text) {  // the line of the first difference
    const size_t at = size_t(std::mismatch(back.begin(), back.end(), train_text.begin(), train_text.end()).second -
                             train_text.begin());
    rep.first_changed_line = 1 + std::count(train_text.begin(), train_text.begin() + int64_t(at), '\n');
  }
  write_split_pair(out_dir, [&](const std::string& path, bool is_train) {
    write_token_ids_h5(path, is_train ? train_ids : test_ids, tokenizer, is_train ? rep.train_bytes : rep.test_bytes,
                       source + ", " + tokenizer.describe());
  });
  return rep;
}

}  // namespace hpctrain
