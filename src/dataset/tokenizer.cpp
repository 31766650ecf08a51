// Tokenizer: bytes directly; SentencePiece through libhpctrain_spm.so (dataset/spm/spm_shim.cpp,
// dlopen()ed next to this library: why, there), lines encoded one by one with the newline id
// between them.
#include "dataset/tokenizer.h"

#include <dlfcn.h>

#include <fstream>
#include <mutex>
#include <sstream>
#include <type_traits>

#include "runtime/check.h"

namespace hpctrain {
namespace {

// libhpctrain_spm.so's table (dataset/spm/spm_shim.cpp), loaded once, next to this library.
struct SpmApi {
  void* (*load)(const std::string*, std::string*) = nullptr;
  void (*free)(void*) = nullptr;
  int (*pieces)(void*) = nullptr;
  bool (*encode)(void*, const std::string*, std::vector<int>*, std::string*) = nullptr;
  bool (*decode)(void*, const std::vector<int>*, std::string*, std::string*) = nullptr;
};

const SpmApi& spm_api() {
  static SpmApi api;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    Dl_info self{};
    if (!dladdr(reinterpret_cast<void*>(&spm_api), &self) || !self.dli_fname) {
      error = "cannot locate libhpctrain itself (dladdr)";
      return;
    }
    std::string dir = self.dli_fname;
    dir = dir.find('/') == std::string::npos ? "." : dir.substr(0, dir.rfind('/'));
    const std::string path = dir + "/libhpctrain_spm.so";
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h) {
      error = dlerror();
      return;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn && error.empty()) error = path + " lacks " + name;
    };
    sym(api.load, "hpctrain_spm_load");
    sym(api.free, "hpctrain_spm_free");
    sym(api.pieces, "hpctrain_spm_pieces");
    sym(api.encode, "hpctrain_spm_encode");
    sym(api.decode, "hpctrain_spm_decode");
  });
  if (!error.empty()) throw Error("SentencePiece support is not available: " + error);
  return api;
}

}  // namespace

struct Tokenizer::Model {
  void* sp = nullptr;
  ~Model() {
    if (sp) spm_api().free(sp);
  }
};

Tokenizer Tokenizer::bytes() { return Tokenizer(); }

Tokenizer Tokenizer::sentencepiece(const std::string& model, const std::string& label) {
  const SpmApi& api = spm_api();
  auto m = std::make_shared<Model>();
  std::string error;
  m->sp = api.load(&model, &error);
  if (!m->sp) {
    // The library's own text names its source line; the cause in words is enough here.
    if (error.find("ParseFromArray") != std::string::npos) error = "it does not parse as a serialized ModelProto";
    while (!error.empty() && error.back() == ' ') error.pop_back();
    throw Error(label + " is not a SentencePiece model (" + error + ")");
  }
  if (api.pieces(m->sp) < 1) throw Error(label + " is not a SentencePiece model (it has no pieces)");
  Tokenizer t;
  t.name_ = "sentencepiece";
  t.model_ = model;
  t.newline_ = api.pieces(m->sp);
  t.vocab_ = t.newline_ + 1;
  t.sp_ = std::move(m);
  return t;
}

Tokenizer Tokenizer::from_flag(const std::string& flag) {
  if (flag == "bytes") return bytes();
  std::ifstream in(flag, std::ios::binary);
  if (!in) throw Error("--tokenizer " + flag + ": no such file (give \"bytes\" or a SentencePiece .model file)");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error("--tokenizer " + flag + ": cannot read it");
  return sentencepiece(ss.str(), "--tokenizer " + flag);
}

std::vector<int64_t> Tokenizer::encode(const std::string& text) const {
  std::vector<int64_t> out;
  if (!sp_) {
    out.reserve(text.size());
    for (unsigned char c : text) out.push_back(c);
    return out;
  }
  out.reserve(text.size() / 3);
  const SpmApi& api = spm_api();
  std::vector<int> ids;
  std::string line, error;
  for (size_t at = 0;;) {
    const size_t nl = text.find('\n', at);
    const size_t end = nl == std::string::npos ? text.size() : nl;
    if (end > at) {
      line.assign(text, at, end - at);
      if (!api.encode(sp_->sp, &line, &ids, &error)) throw Error("SentencePiece encode failed: " + error);
      out.insert(out.end(), ids.begin(), ids.end());
    }
    if (nl == std::string::npos) break;
    out.push_back(newline_);
    at = nl + 1;
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  for (int64_t id : ids)
    if (id < 0 || id >= vocab_)
      throw Error("token id " + std::to_string(id) + " is outside the " + name_ + " vocabulary [0, " +
                  std::to_string(vocab_) + ")");
  std::string out;
  if (!sp_) {
    for (int64_t id : ids) out.push_back(static_cast<char>(id));
    return out;
  }
  const SpmApi& api = spm_api();
  std::vector<int> run;
  std::string piece, error;
  auto flush = [&] {
    if (run.empty()) return;
    if (!api.decode(sp_->sp, &run, &piece, &error)) throw Error("SentencePiece decode failed: " + error);
    out += piece;
    run.clear();
  };
  for (int64_t id : ids) {
    if (id == newline_) {
      flush();
      out.push_back('\n');
    } else {
      run.push_back(static_cast<int>(id));
    }
  }
  flush();
  return out;
}

std::string Tokenizer::describe(const std::string& label) const {
  if (!sp_) return "bytes, vocab_size 256";
  return "sentencepiece (" + (label.empty() ? std::string() : label + ": ") + std::to_string(newline_) +
         " pieces + the newline id " + std::to_string(newline_) + "), vocab_size " + std::to_string(vocab_);
}

}  // namespace hpctrain
