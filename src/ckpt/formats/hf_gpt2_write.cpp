// write_hf_gpt2 (ckpt/formats/hf_gpt2.h): the safetensors header is planned from the manifest
// alone (names, shapes, dtypes), so each tensor can be written at its offset the moment
// verify_checkpoint hands it over, and only one tensor is ever in memory.
#include <ATen/ATen.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "ckpt/dir_ops.h"
#include "ckpt/formats/hf_gpt2.h"
#include "ckpt/manifest.h"
#include "ckpt/verify.h"
#include "io/h5_tensor.h"
#include "runtime/check.h"
#include "runtime/tensor_text.h"

namespace fs = std::filesystem;

namespace hpctrain::ckpt {
namespace {

const char* st_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "F32";
    case at::kDouble: return "F64";
    case at::kHalf: return "F16";
    case at::kBFloat16: return "BF16";
    default: throw Error(std::string("--format hf: tensors must be floating point, not ") + c10::toString(t));
  }
}

const char* config_dtype(at::ScalarType t) {
  return t == at::kHalf ? "float16" : t == at::kBFloat16 ? "bfloat16" : t == at::kDouble ? "float64" : "float32";
}

struct Planned {
  std::vector<int64_t> shape;  // GPT-2's layout
  at::ScalarType dtype;
  uint64_t offset = 0, bytes = 0;
  bool zero = false;  // a bias of a bias=false model
  bool written = false;
};

}  // namespace

size_t write_hf_gpt2(const std::string& step_dir, const std::string& out_dir, const HfGpt2Config& c,
                     const std::string& cast) {
  // 1. The plan, every check before anything is created.
  Manifest m = read_manifest(step_dir);
  std::map<std::string, const TensorEntry*> ours;
  for (const auto& e : m.tensors)
    if (e.name.starts_with("model/")) ours[e.name.substr(6)] = &e;
  const auto want = hf_gpt2_tensors(c);
  for (const auto& [name, e] : ours)
    if (std::none_of(want.begin(), want.end(), [&](const auto& w) { return w.first == name; }))
      throw Error(step_dir + ": tensor " + printable(name) + " has no GPT-2 equivalent");
  const at::ScalarType to = cast == "fp16" ? at::kHalf : cast == "bf16" ? at::kBFloat16 : at::ScalarType::Undefined;
  std::map<std::string, Planned> plan;
  nlohmann::ordered_json header;
  uint64_t off = 0;
  at::ScalarType first = at::kFloat;
  for (const auto& [name, shape] : want) {
    Planned p;
    p.shape = shape;
    auto it = ours.find(name);
    if (it == ours.end()) {
      if (c.bias || !name.ends_with(".bias"))
        throw Error(step_dir + " has no tensor model/" + name + ", which GPT-2 needs");
      p.zero = true;
      p.dtype = to != at::ScalarType::Undefined ? to : first;
    } else {
      std::vector<int64_t> layout = it->second->shape;  // ours: Conv1D weights transposed
      if (hf_gpt2_conv1d(name) && layout.size() == 2) std::swap(layout[0], layout[1]);
      if (layout != shape)
        throw Error(step_dir + ": tensor model/" + name + " has shape " + c10::str(c10::IntArrayRef(it->second->shape)) +
                    ", which does not fit GPT-2 with its config");
      at::ScalarType stored = h5::dtype_from_name(it->second->dtype);
      p.dtype = to != at::ScalarType::Undefined && at::isFloatingType(stored) ? to : stored;
    }
    if (plan.empty()) first = p.dtype;
    p.bytes = static_cast<uint64_t>(c10::multiply_integers(shape)) * c10::elementSize(p.dtype);
    p.offset = off;
    off += p.bytes;
    header[name] = {{"dtype", st_dtype(p.dtype)}, {"shape", shape}, {"data_offsets", {p.offset, p.offset + p.bytes}}};
    plan[name] = p;
  }
  header["__metadata__"] = {{"format", "pt"}, {"hpctrain_step", std::to_string(m.step)}};
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  const uint64_t base = 8 + h.size();

  fs::path out = fs::path(out_dir).lexically_normal();
  if (!out.has_filename()) out = out.parent_path();  // "DIR/"
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec)) throw Error("--out " + out_dir + " exists and is not a directory");
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec)) throw Error("the directory of --out " + out_dir + " does not exist");

  // 2. The files: .tmp, fsynced, renamed; on any failure nothing of ours stays behind.
  const bool created = !fs::exists(out, ec);
  if (created) fs::create_directory(out);
  const std::string st_tmp = (out / "model.safetensors.tmp").string(), cfg_tmp = (out / "config.json.tmp").string();
  int fd = -1;
  try {
    fd = ::open(st_tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error("cannot create " + st_tmp + ": " + std::strerror(errno));
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((h.size() >> (8 * i)) & 0xff);
    pwrite_all(fd, len, 8, 0, st_tmp);
    pwrite_all(fd, h.data(), h.size(), 8, st_tmp);
    if (::ftruncate(fd, static_cast<off_t>(base + off)) != 0) throw Error("cannot size " + st_tmp + ": " + std::strerror(errno));
    verify_checkpoint(step_dir, [&](const TensorEntry& e, at::Tensor t) {
      if (!e.name.starts_with("model/")) return;
      Planned& p = plan.at(e.name.substr(6));
      t = t.to(p.dtype);
      t = hf_gpt2_conv1d(e.name) ? t.t().contiguous() : t.contiguous();
      pwrite_all(fd, t.data_ptr(), p.bytes, base + p.offset, st_tmp);
      p.written = true;
    });
    for (auto& [name, p] : plan) {
      if (p.zero) {
        at::Tensor z = at::zeros(p.shape, at::TensorOptions(p.dtype));
        pwrite_all(fd, z.data_ptr(), p.bytes, base + p.offset, st_tmp);
      } else if (!p.written) {
        throw Error(step_dir + ": tensor model/" + name + " was not read back");
      }
    }
    if (::fsync(fd) != 0) throw Error("fsync " + st_tmp + " failed: " + std::strerror(errno));
    ::close(fd);
    fd = -1;
    write_file(cfg_tmp, hf_gpt2_config_json(c, config_dtype(first)).dump(2) + "\n", /*sync=*/true);
    rename_or_throw(st_tmp, (out / "model.safetensors").string());
    rename_or_throw(cfg_tmp, (out / "config.json").string());
    fsync_path(out.string());
    if (created) fsync_path(parent.string());
  } catch (...) {
    if (fd >= 0) ::close(fd);
    fs::remove(st_tmp, ec);
    fs::remove(cfg_tmp, ec);
    if (created) fs::remove_all(out, ec);
    throw;
  }
  return want.size();
}

}  // namespace hpctrain::ckpt
