// Why the pickle is written by hand: torch::pickle_save of a c10::Dict emits
// torch.jit._pickle.restore_type_tag, which torch.load's weights-only unpickler rejects. The
// few opcodes torch.save's pickler uses for a state dict are small and stable (protocol 2).
#include "ckpt/formats/state_dict_pt.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include "ckpt/merged_file.h"
#include "ckpt/formats/pickle_reader.h"
#include "ckpt/formats/torchscript_archive.h"
#include "runtime/check.h"
#include "runtime/tensor_text.h"

namespace hpctrain::ckpt {
namespace {

constexpr const char* kMetaRecord = "hpctrain_meta.json";

// torch.<Name>Storage for a dtype: what torch.save pickles as the storage's type.
const char* storage_type(at::ScalarType st) {
  switch (st) {
    case at::kFloat: return "FloatStorage";
    case at::kDouble: return "DoubleStorage";
    case at::kHalf: return "HalfStorage";
    case at::kBFloat16: return "BFloat16Storage";
    case at::kInt: return "IntStorage";
    case at::kLong: return "LongStorage";
    case at::kByte: return "ByteStorage";
    case at::kBool: return "BoolStorage";
    default: throw Error(std::string("state dict: unsupported dtype ") + c10::toString(st));
  }
}

// A protocol-2 pickle, the opcodes Python's pickle.Pickler emits for these values.
class Pickle {
 public:
  Pickle() { b_ += "\x80\x02"; }
  void op(char c) { b_ += c; }
  void global(const char* module, const char* name) {
    b_ += 'c';
    b_ += module;
    b_ += '\n';
    b_ += name;
    b_ += '\n';
  }
  void str(const std::string& s) {  // BINUNICODE
    b_ += 'X';
    le(static_cast<uint64_t>(s.size()), 4);
    b_ += s;
  }
  void integer(int64_t v) {
    if (v >= 0 && v < 256) {
      b_ += 'K';
      le(static_cast<uint64_t>(v), 1);
    } else if (v >= 0 && v < 65536) {
      b_ += 'M';
      le(static_cast<uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      b_ += 'J';
      le(static_cast<uint64_t>(static_cast<uint32_t>(static_cast<int32_t>(v))), 4);
    } else {
      b_ += "\x8a\x08";  // LONG1, 8 bytes two's complement
      le(static_cast<uint64_t>(v), 8);
    }
  }
  void int_tuple(at::IntArrayRef v) {
    if (v.empty()) return op(')');
    op('(');
    for (int64_t x : v) integer(x);
    op('t');
  }
  void empty_ordered_dict() {
    global("collections", "OrderedDict");
    op(')');
    op('R');
  }
  const std::string& bytes() const { return b_; }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  std::string b_;
};

// The strides of a contiguous tensor of `shape`, as LibTorch gives them (sizes 0 count as 1).
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) st[i - 1] = st[i] * std::max<int64_t>(shape[i], 1);
  return st;
}

// torch.save's pickle of OrderedDict(name -> tensor), storage k holding tensor k.
std::string state_dict_pickle(const std::vector<TensorSpec>& model) {
  Pickle p;
  p.empty_ordered_dict();
  p.op('(');
  for (size_t k = 0; k < model.size(); ++k) {
    const TensorSpec& t = model[k];
    p.str(t.name);
    p.global("torch._utils", "_rebuild_tensor_v2");
    p.op('(');
    p.op('(');  // persistent id: ('storage', torch.XStorage, key, location, numel)
    p.str("storage");
    p.global("torch", storage_type(t.dtype));
    p.str(std::to_string(k));
    p.str("cpu");
    p.integer(c10::multiply_integers(t.shape));
    p.op('t');
    p.op('Q');     // BINPERSID
    p.integer(0);  // storage offset
    p.int_tuple(t.shape);
    p.int_tuple(contiguous_strides(t.shape));
    p.op('\x89');            // requires_grad = False
    p.empty_ordered_dict();  // backward hooks
    p.op('t');
    p.op('R');
  }
  p.op('u');  // SETITEMS
  p.op('.');
  return p.bytes();
}

// data.pkl and the format records first (the pickle needs only names, dtypes and shapes), then
// one data/<k> record per tensor as it comes, our metadata record last.
class StateDictWriter : public MergedFileWriter {
 public:
  StateDictWriter(const std::string& path, const nlohmann::json& meta, std::vector<TensorSpec> specs)
      : MergedFileWriter(std::move(specs)), path_(path), meta_(meta.dump()) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error("cannot create " + path + ": " + std::strerror(errno));
    guard([&] {
      zip_ = std::make_unique<caffe2::serialize::PyTorchStreamWriter>(
          [this](const void* data, size_t n) { return sink(data, n); });
      std::string pkl = state_dict_pickle(this->specs());
      zip_->writeRecord("data.pkl", pkl.data(), pkl.size());
      zip_->writeRecord(".format_version", "1", 1);
      zip_->writeRecord(".storage_alignment", "64", 2);
      zip_->writeRecord("byteorder", "little", 6);
    });
  }
  ~StateDictWriter() override {
    zip_.reset();  // writes its end records into the fd if close() was not reached
    if (fd_ >= 0) ::close(fd_);
  }

 protected:
  void write(size_t k, const at::Tensor& t) override {
    guard([&] { zip_->writeRecord("data/" + std::to_string(k), t.numel() ? t.data_ptr() : nullptr, t.nbytes()); });
  }
  void finish() override {
    guard([&] {
      zip_->writeRecord(kMetaRecord, meta_.data(), meta_.size());
      zip_->writeEndOfFile();
    });
    if (write_errno_ == 0 && ::fsync(fd_) != 0) write_errno_ = errno;
    ::close(std::exchange(fd_, -1));
    if (write_errno_ != 0) throw Error("write " + path_ + " failed: " + std::strerror(write_errno_));
  }

 private:
  // The zip writer checks the count returned; a write error is kept and reported in our words.
  size_t sink(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    size_t done = 0;
    while (done < n && write_errno_ == 0) {
      ssize_t w = ::write(fd_, p + done, n - done);
      if (w < 0 && errno != EINTR) write_errno_ = errno;
      if (w > 0) done += static_cast<size_t>(w);
    }
    return n;
  }
  template <typename F>
  void guard(F&& f) {
    try {
      f();
    } catch (const c10::Error& e) {
      throw Error("cannot write " + path_ + ": " + torch_error_line(e));
    }
    if (write_errno_ != 0) throw Error("write " + path_ + " failed: " + std::strerror(write_errno_));
  }
  std::string path_, meta_;
  int fd_ = -1;
  int write_errno_ = 0;
  std::unique_ptr<caffe2::serialize::PyTorchStreamWriter> zip_;
};

}  // namespace

std::string torch_error_line(const c10::Error& e) {
  std::string s = e.what_without_backtrace();
  s = s.substr(0, s.find('\n'));
  return printable(s.substr(0, s.find(". ")));
}

std::unique_ptr<MergedFileWriter> open_state_dict_pt(const std::string& path, const nlohmann::json& meta,
                                                     std::vector<TensorSpec> specs) {
  return std::make_unique<StateDictWriter>(path, meta, std::move(specs));
}

CheckpointState read_pt_file(const std::string& path) {
  CheckpointState st;
  nlohmann::json stored = nlohmann::json::object();
  try {
    caffe2::serialize::PyTorchStreamReader zip(path);
    if (zip.hasRecord("constants.pkl")) return read_torchscript(path);  // a TorchScript module
    if (zip.hasRecord(kMetaRecord)) {
      auto [data, n] = zip.getRecord(kMetaRecord);
      stored = nlohmann::json::parse(static_cast<const char*>(data.get()), static_cast<const char*>(data.get()) + n,
                                     nullptr, false);
      if (stored.is_discarded()) throw Error(path + ": record " + kMetaRecord + " is not JSON");
    }
    auto [pkl_data, pkl_size] = zip.getRecord("data.pkl");
    std::string pkl(static_cast<const char*>(pkl_data.get()), pkl_size);
    StorageReader storage = [&](const std::string& key, void* dst, size_t n) -> size_t {
      std::string rec = "data/" + key;
      if (!zip.hasRecord(rec)) throw Error(path + ": record " + printable(rec) + " is missing");
      size_t size = zip.getRecordSize(rec);
      if (size < n) return size;
      if (size == n) return zip.getRecord(rec, dst, n);
      std::vector<char> buf(size);
      zip.getRecord(rec, buf.data(), size);
      std::memcpy(dst, buf.data(), n);
      return size;
    };
    for (auto& [name, t] : unpickle_state_dict(pkl, storage, path)) st.tensors.emplace_back("model/" + name, t);
  } catch (const c10::Error& e) {
    throw Error(path + " is not a readable PyTorch file (truncated or another format?): " + torch_error_line(e));
  }
  st.meta = meta_from_merged(stored);
  return st;
}

}  // namespace hpctrain::ckpt
