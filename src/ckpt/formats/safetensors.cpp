// safetensors, written and read here without a safetensors library: the header is ordered
// JSON padded with spaces to a multiple of 8; on reading, each tensor's offsets are checked
// against its shape and the data size before its bytes are read.
#include "ckpt/formats/safetensors.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "ckpt/dir_ops.h"
#include "ckpt/merged_file.h"
#include "runtime/check.h"
#include "runtime/tensor_text.h"

namespace hpctrain::ckpt {
namespace {

const std::pair<const char*, at::ScalarType> kDtypes[] = {
    {"F32", at::kFloat}, {"F64", at::kDouble}, {"F16", at::kHalf}, {"BF16", at::kBFloat16},
    {"I32", at::kInt},   {"I64", at::kLong},   {"U8", at::kByte},  {"BOOL", at::kBool}};

const char* st_dtype(at::ScalarType t) {
  for (auto& [name, st] : kDtypes)
    if (st == t) return name;
  throw Error(std::string("safetensors: unsupported dtype ") + c10::toString(t));
}

}  // namespace

namespace {

// The header from the specs, then each tensor's bytes as it comes, back to back.
class SafetensorsWriter : public MergedFileWriter {
 public:
  SafetensorsWriter(const std::string& path, const nlohmann::json& meta, std::vector<TensorSpec> specs)
      : MergedFileWriter(std::move(specs)), path_(path) {
    nlohmann::ordered_json header;
    uint64_t off = 0;
    for (const auto& s : this->specs()) {
      header[s.name] = {{"dtype", st_dtype(s.dtype)}, {"shape", s.shape}, {"data_offsets", {off, off + s.nbytes()}}};
      off += s.nbytes();
    }
    header["__metadata__"] = {{"format", "pt"}, {"hpctrain_meta", meta.dump()}};
    std::string h = header.dump();
    h.append((8 - h.size() % 8) % 8, ' ');
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((h.size() >> (8 * i)) & 0xff);
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error("cannot create " + path + ": " + std::strerror(errno));
    put(len, 8);
    put(h.data(), h.size());
  }
  ~SafetensorsWriter() override {
    if (fd_ >= 0) ::close(fd_);
  }

 protected:
  void write(size_t, const at::Tensor& t) override {
    if (t.nbytes()) put(t.data_ptr(), t.nbytes());
  }
  void finish() override {
    if (::fsync(fd_) != 0) throw Error("fsync " + path_ + " failed: " + std::strerror(errno));
    ::close(std::exchange(fd_, -1));
  }

 private:
  void put(const void* data, size_t n) {
    pwrite_all(fd_, data, n, off_, path_);
    off_ += n;
  }
  std::string path_;
  int fd_ = -1;
  uint64_t off_ = 0;
};

}  // namespace

std::unique_ptr<MergedFileWriter> open_safetensors(const std::string& path, const nlohmann::json& meta,
                                                   std::vector<TensorSpec> specs) {
  return std::make_unique<SafetensorsWriter>(path, meta, std::move(specs));
}

CheckpointState read_safetensors(const std::string& path) {
  auto bad = [&](const std::string& why) { return Error(path + " is not a readable safetensors file: " + why); };
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path);
  uint64_t size = std::filesystem::file_size(path);
  unsigned char len8[8];
  if (size < 8 || !in.read(reinterpret_cast<char*>(len8), 8)) throw bad("shorter than its 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len8[i];
  if (n > size - 8 || n > (uint64_t{100} << 20)) throw bad("header length " + std::to_string(n) + " exceeds the file");
  std::string h(n, '\0');
  in.read(h.data(), static_cast<std::streamsize>(n));
  nlohmann::json header = nlohmann::json::parse(h, nullptr, false);
  if (header.is_discarded() || !header.is_object()) throw bad("the header is not a JSON object");
  uint64_t data_size = size - 8 - n;
  CheckpointState st;
  nlohmann::json stored = nlohmann::json::object();
  for (auto& [name, e] : header.items()) {
    if (name == "__metadata__") {
      if (e.is_object() && e.contains("hpctrain_meta") && e["hpctrain_meta"].is_string()) {
        stored = nlohmann::json::parse(e["hpctrain_meta"].get<std::string>(), nullptr, false);
        if (stored.is_discarded()) throw bad("__metadata__.hpctrain_meta is not JSON");
      }
      continue;
    }
    at::ScalarType dt = at::kFloat;
    bool known = false;
    uint64_t begin = 0, end = 0;
    std::vector<int64_t> shape;
    try {
      std::string d = e.at("dtype").get<std::string>();
      for (auto& [nm, s] : kDtypes)
        if (d == nm) dt = s, known = true;
      if (!known) throw bad("tensor " + printable(name) + " has unsupported dtype " + printable(d));
      shape = e.at("shape").get<std::vector<int64_t>>();
      auto offs = e.at("data_offsets").get<std::vector<uint64_t>>();
      if (offs.size() != 2) throw bad("tensor " + printable(name) + ": data_offsets must be [begin, end]");
      begin = offs[0];
      end = offs[1];
    } catch (const nlohmann::json::exception& x) {
      throw bad("tensor " + printable(name) + ": " + printable(x.what()));
    }
    at::Tensor t = at::empty(shape, at::TensorOptions(dt));
    if (end < begin || end > data_size || end - begin != t.nbytes())
      throw bad("tensor " + printable(name) + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                "] do not fit its shape or the " + std::to_string(data_size) + " data bytes (truncated?)");
    in.seekg(static_cast<std::streamoff>(8 + n + begin));
    if (t.nbytes() && !in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes())))
      throw bad("tensor " + printable(name) + ": read failed");
    st.tensors.emplace_back("model/" + name, std::move(t));
  }
  st.meta = meta_from_merged(stored);
  return st;
}

}  // namespace hpctrain::ckpt
