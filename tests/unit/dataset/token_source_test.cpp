// TokenSource and the token loader: windows of T+1 tokens at stride T, never across files, the
// same contents whether a stream is read whole or per batch, every bad file its own one-line
// error, and `data text`'s byte tokenization (UTF-8 check, per-file split, skipped binaries).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <set>

#include "dataset/data_source.h"
#include "dataset/loader.h"
#include "dataset/prep/text_tokens.h"
#include "dataset/token_source.h"
#include "runtime/check.h"
#include "temp_dir.h"

using hpctrain::TokenSource;
using hpctrain::testing::TempDir;

namespace {

struct TokSpec {
  hid_t type = H5T_STD_U16LE;
  std::vector<int64_t> tokens;
  int64_t vocab = 1000;  // < 0: no vocab_size attribute
  const char* tokenizer = nullptr;
  bool float_tokens = false;
  bool utf8 = false;  // the tokenizer as h5py writes a str: variable length, UTF-8
};

std::string make_tokens(const TempDir& dir, const std::string& name, const TokSpec& s) {
  std::string path = dir / name;
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t n = s.tokens.size();
  hid_t sp = H5Screate_simple(1, &n, nullptr);
  hid_t d =
      H5Dcreate2(f, "tokens", s.float_tokens ? H5T_IEEE_F32LE : s.type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, s.tokens.data());
  H5Dclose(d);
  H5Sclose(sp);
  if (s.vocab >= 0) {
    hid_t asp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "vocab_size", H5T_NATIVE_INT64, asp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, &s.vocab);
    H5Aclose(a);
    H5Sclose(asp);
  }
  if (s.tokenizer) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, s.utf8 ? H5T_VARIABLE : std::strlen(s.tokenizer));
    if (s.utf8) H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t asp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "tokenizer", t, asp, H5P_DEFAULT, H5P_DEFAULT);
    if (s.utf8)
      H5Awrite(a, t, &s.tokenizer);
    else
      H5Awrite(a, t, s.tokenizer);
    H5Aclose(a);
    H5Sclose(asp);
    H5Tclose(t);
  }
  H5Fclose(f);
  return path;
}

std::vector<int64_t> iota(int64_t n, int64_t from = 0) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const hpctrain::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(TokenSource, WindowsAtStrideTNeverCrossFiles) {
  TempDir dir;
  TokSpec a, b;
  a.tokens = iota(23);       // (23-1)/5 = 4 windows
  b.tokens = iota(11, 100);  // (11-1)/5 = 2 windows
  a.tokenizer = b.tokenizer = "bytes";
  std::vector<std::string> files = {make_tokens(dir, "train-00000.h5", a), make_tokens(dir, "train-00001.h5", b)};
  ASSERT_TRUE(hpctrain::is_token_file(files[0]));
  for (int64_t mem : {int64_t{512} << 20, int64_t{0}}) {  // whole-stream cache, then per-batch reads
    TokenSource src(files, 5, mem);
    const auto& inf = src.info();
    EXPECT_TRUE(inf.tokens);
    EXPECT_EQ(inf.size, 6);
    EXPECT_EQ(inf.token_count, 34);
    EXPECT_EQ(inf.vocab_size, 1000);
    EXPECT_EQ(inf.num_classes, 1000);
    EXPECT_EQ(inf.tokenizer, "bytes");
    EXPECT_EQ(inf.sample_shape, std::vector<int64_t>{5});
    std::vector<int64_t> want = {0, 1, 1, 3, 4, 5};  // repeats and both files in one read
    std::vector<int64_t> in(want.size() * 5), tg(want.size() * 5);
    src.read(want, in.data(), tg.data());
    for (size_t i = 0; i < want.size(); ++i) {
      const int64_t w = want[i];
      const int64_t first = w < 4 ? w * 5 : 100 + (w - 4) * 5;  // file 1's windows start at its own 0
      for (int64_t k = 0; k < 5; ++k) {
        EXPECT_EQ(in[i * 5 + k], first + k) << "window " << w << " mem " << mem;
        EXPECT_EQ(tg[i * 5 + k], first + k + 1) << "window " << w << " mem " << mem;
      }
    }
  }
}

TEST(TokenSource, LoaderGivesInt64InputsAndShiftedTargets) {
  TempDir dir;
  TokSpec a;
  a.type = H5T_STD_U8LE;
  a.tokens = iota(41);  // 10 windows of 4
  a.vocab = 256;
  std::string f = make_tokens(dir, "train.h5", a);
  hpctrain::LoaderOptions o;
  o.batch_size = 3;
  o.seq_len = 4;
  o.prefetch = 1;
  o.seed = 3;
  hpctrain::Loader l0(std::vector<std::string>{f}, 2, 0, o), l1(std::vector<std::string>{f}, 2, 1, o);
  EXPECT_EQ(l0.batches_per_epoch(), 2);  // 10 windows / 2 ranks = 5 each, batches of 3
  std::set<int64_t> starts;
  for (auto* l : {&l0, &l1})
    while (auto b = l->next()) {
      ASSERT_EQ(b->images.scalar_type(), at::kLong);
      ASSERT_EQ(b->images.dim(), 2);
      EXPECT_EQ(b->images.size(1), 4);
      EXPECT_TRUE(b->labels.equal(b->images.add(1)));  // tokens are 0,1,2,...: the target is the next id
      for (int64_t r = 0; r < b->images.size(0); ++r) starts.insert(b->images[r][0].item<int64_t>());
    }
  EXPECT_EQ(starts, (std::set<int64_t>{0, 4, 8, 12, 16, 20, 24, 28, 32, 36}));  // every window once
}

TEST(TokenSource, BadFilesEachNameTheCause) {
  TempDir dir;
  TokSpec ok;
  ok.tokens = iota(50);
  std::string good = make_tokens(dir, "good.h5", ok);

  TokSpec f = ok;
  f.float_tokens = true;
  EXPECT_NE(error_of([&] { TokenSource({make_tokens(dir, "f.h5", f)}, 4, 1 << 20); }).find("must be integers"),
            std::string::npos);
  TokSpec nv = ok;
  nv.vocab = -1;
  EXPECT_NE(error_of([&] { TokenSource({make_tokens(dir, "nv.h5", nv)}, 4, 1 << 20); }).find("'vocab_size'"),
            std::string::npos);
  TokSpec big = ok;
  big.tokens[37] = 1000;  // == vocab_size
  std::string bad = make_tokens(dir, "big.h5", big);
  std::string e = error_of([&] { TokenSource({bad}, 4, 1 << 20); });  // checked at open
  EXPECT_NE(e.find("token id 1000 at position 37"), std::string::npos) << e;
  EXPECT_NE(e.find("big.h5"), std::string::npos) << e;
  e = error_of([&] { TokenSource({bad}, 4, 0); });  // not read whole: streamed once at open, same text
  EXPECT_NE(e.find("token id 1000 at position 37"), std::string::npos) << e;
  TokenSource lazy({bad}, 4, 0, /*lazy=*/true);  // read per batch: checked as read, same text
  std::vector<int64_t> in(4), tg(4);
  EXPECT_NO_THROW(lazy.read({0}, in.data(), tg.data()));
  try {
    lazy.read({9}, in.data(), tg.data());  // window 9 = tokens 36..40
    ADD_FAILURE() << "no error for a bad id read mid-run";
  } catch (const hpctrain::InputError& x) {  // bad input found mid-run: exit code 2, never restarted
    EXPECT_NE(std::string(x.what()).find("token id 1000 at position 37"), std::string::npos) << x.what();
  }
  TokSpec empty = ok;
  empty.tokens.clear();
  e = error_of([&] { TokenSource({make_tokens(dir, "empty.h5", empty)}, 4, 1 << 20); });
  EXPECT_NE(e.find("empty.h5: dataset 'tokens' is empty"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { TokenSource({good}, 50, 1 << 20); }).find("is larger than"), std::string::npos);
  EXPECT_NE(error_of([&] { TokenSource({good}, 0, 1 << 20); }).find("--seq-len"), std::string::npos);
  TokSpec other = ok;
  other.vocab = 2000;
  e = error_of([&] { TokenSource({good, make_tokens(dir, "other.h5", other)}, 4, 1 << 20); });
  EXPECT_NE(e.find("vocab_size 2000"), std::string::npos) << e;
  // seq_len on image data is an error naming the file.
  hpctrain::DataSourceOptions io;
  io.seq_len = 8;
  std::string img = dir / "img.h5";
  H5Fclose(H5Fcreate(img.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  e = error_of([&] { hpctrain::DataSource({img}, io); });
  EXPECT_NE(e.find("is for token data"), std::string::npos) << e;
}

// The start-up pass over a stream that is not read whole: every stored integer type, the first
// bad id of several, one past a 4 Mi-token chunk boundary, and a type that cannot hold a bad id.
TEST(TokenSource, StreamedAtOpenInItsStoredType) {
  TempDir dir;
  const std::vector<std::pair<hid_t, int64_t>> types = {
      {H5T_STD_I8LE, -3},      {H5T_STD_I16LE, -300},  {H5T_STD_I32LE, -70000},  {H5T_STD_I64LE, -(int64_t{1} << 40)},
      {H5T_STD_U8LE, 200},     {H5T_STD_U16LE, 65535}, {H5T_STD_U32LE, 1 << 30}, {H5T_STD_U64LE, int64_t{1} << 40},
      {H5T_STD_I64BE, 100000}, {H5T_STD_U16BE, 150}};
  for (size_t k = 0; k < types.size(); ++k) {
    TokSpec s;
    s.type = types[k].first;
    s.vocab = 100;
    s.tokens = std::vector<int64_t>(200, 7);
    s.tokens[150] = types[k].second;
    s.tokens[170] = 101;  // a later bad id: not the one named
    std::string e = error_of([&] { TokenSource({make_tokens(dir, "t" + std::to_string(k) + ".h5", s)}, 4, 0); });
    EXPECT_NE(e.find("token id " + std::to_string(types[k].second) + " at position 150 is outside [0, 100)"),
              std::string::npos)
        << k << ": " << e;
  }
  TokSpec big;  // a bad id just past the first 4 Mi-token chunk
  big.type = H5T_STD_U16LE;
  big.vocab = 1000;
  big.tokens = std::vector<int64_t>((size_t{4} << 20) + 100, 3);
  big.tokens[(size_t{4} << 20) + 7] = 1000;
  std::string e = error_of([&] { TokenSource({make_tokens(dir, "big.h5", big)}, 16, 0); });
  EXPECT_NE(e.find("token id 1000 at position 4194311"), std::string::npos) << e;
  TokSpec named;  // h5py's f.attrs["tokenizer"] = "gpt2" (data/README.md): read, not dropped
  named.tokens = iota(50);
  named.tokenizer = "gpt2";
  named.utf8 = true;
  EXPECT_EQ(TokenSource({make_tokens(dir, "named.h5", named)}, 4, 0).info().tokenizer, "gpt2");
  TokSpec bytes;  // uint8 with vocab_size 256: every value is an id, nothing to find
  bytes.type = H5T_STD_U8LE;
  bytes.vocab = 256;
  bytes.tokens = iota(300);
  for (auto& t : bytes.tokens) t %= 256;
  EXPECT_NO_THROW(TokenSource({make_tokens(dir, "bytes.h5", bytes)}, 4, 0));
}

TEST(TextTokens, Utf8CheckAndPerFileSplit) {
  EXPECT_TRUE(hpctrain::is_utf8_text("plain ascii\n"));
  EXPECT_TRUE(hpctrain::is_utf8_text("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(hpctrain::is_utf8_text(std::string("a\0b", 3)));
  EXPECT_FALSE(hpctrain::is_utf8_text("\xc3"));          // truncated
  EXPECT_FALSE(hpctrain::is_utf8_text("\xc0\xaf"));      // overlong
  EXPECT_FALSE(hpctrain::is_utf8_text("\xed\xa0\x80"));  // surrogate
  TempDir dir;
  std::filesystem::create_directories(dir / "in");
  std::ofstream(dir / "in/a") << std::string(100, 'a');
  std::ofstream(dir / "in/b") << std::string(50, 'b');
  std::ofstream(dir / "in/b.dat", std::ios::binary) << std::string("\0\0\0\2", 4);
  std::filesystem::create_symlink(dir / "in/a", dir / "in/a.u8");
  auto r = hpctrain::write_text_tokens({dir / "in"}, dir / "out", 0.1);
  EXPECT_EQ(r.files, 2);
  EXPECT_EQ(r.train_tokens, 90 + 45);
  EXPECT_EQ(r.test_tokens, 10 + 5);
  EXPECT_EQ(r.skipped.size(), 2u);  // b.dat (binary) and a.u8 (already read)
  TokenSource train({dir / "out/train.h5"}, 4, 1 << 20), test({dir / "out/test.h5"}, 4, 1 << 20);
  EXPECT_EQ(train.info().tokenizer, "bytes");
  EXPECT_EQ(train.info().vocab_size, 256);
  EXPECT_EQ(train.info().token_count, 135);
  std::vector<int64_t> in(4), tg(4);
  test.read({0}, in.data(), tg.data());  // test = a's last 10 bytes, then b's last 5
  EXPECT_EQ(in, (std::vector<int64_t>{'a', 'a', 'a', 'a'}));
  test.read({2}, in.data(), tg.data());  // tokens 8..12: a a b b b
  EXPECT_EQ(in, (std::vector<int64_t>{'a', 'a', 'b', 'b'}));
  EXPECT_FALSE(std::filesystem::exists(dir / "out2"));
  EXPECT_THROW(hpctrain::write_text_tokens({dir / "in/b.dat"}, dir / "out2", 0.1), hpctrain::Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "out2/train.h5"));
}
