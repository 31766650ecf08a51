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

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw Error("write " + path + " failed: " + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

void write_safetensors(const std::string& path, const nlohmann::json& meta, const NamedTensors& model) {
  nlohmann::ordered_json header;
  uint64_t off = 0;
  for (const auto& [name, t] : model) {
    TORCH_CHECK(t.device().is_cpu() && t.is_contiguous(), "safetensors tensors must be contiguous on CPU");
    header[name] = {
        {"dtype", st_dtype(t.scalar_type())}, {"shape", t.sizes().vec()}, {"data_offsets", {off, off + t.nbytes()}}};
    off += t.nbytes();
  }
  header["__metadata__"] = {{"format", "pt"}, {"hpctrain_meta", meta.dump()}};
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((h.size() >> (8 * i)) & 0xff);

  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot create " + path + ": " + std::strerror(errno));
  try {
    write_all(fd, len, 8, path);
    write_all(fd, h.data(), h.size(), path);
    for (const auto& [name, t] : model)
      if (t.nbytes()) write_all(fd, t.data_ptr(), t.nbytes(), path);
    if (::fsync(fd) != 0) throw Error("fsync " + path + " failed: " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
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
