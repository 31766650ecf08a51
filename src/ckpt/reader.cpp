#include "ckpt/reader.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "ckpt/dir_ops.h"
#include "ckpt/h5_image.h"
#include "ckpt/h5_tensor.h"
#include "ckpt/safetensors.h"
#include "ckpt/state_dict_pt.h"
#include "runtime/check.h"

namespace fs = std::filesystem;

namespace hpctrain::ckpt {
namespace {

// The step directory ROOT/latest names; throws if it names nothing that exists.
std::string follow_latest(const fs::path& latest) {
  std::ifstream in(latest);
  std::string name;
  in >> name;
  if (name.empty()) throw Error(latest.string() + " is empty");
  fs::path target = latest.parent_path() / name;
  if (name.find('/') != std::string::npos || !fs::is_directory(target))
    throw Error(latest.string() + " names " + printable(name) + ", which is not a checkpoint directory there");
  return target.string();
}

// XXH3 of bytes [off, off + n) of a file (the tensor a damaged shard's checksum points at).
std::string range_checksum(const std::string& path, int64_t off, int64_t n) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(off);
  at::Tensor buf = at::empty({n}, at::kByte);
  if (!in.read(static_cast<char*>(buf.data_ptr()), n)) return "";
  return checksum(buf);
}

// Whole-file size and checksum of shard s, before HDF5 parses any of it.
void check_shard_file(const std::string& path, const Manifest& m, size_t s) {
  const ShardEntry& e = m.shards[s];
  if (e.xxh3.empty()) return;  // format version 1: per-tensor checksums only
  int64_t size = static_cast<int64_t>(fs::file_size(path));
  if (size != e.bytes)
    throw Error(path + ": file is " + std::to_string(size) + " bytes, the manifest says " +
                std::to_string(e.bytes) + " (truncated, or replaced by another file)");
  FileDigest d = digest_file(path);
  if (d.xxh3 == e.xxh3) return;
  std::string what = path + ": file checksum mismatch (file " + d.xxh3 + ", manifest " + e.xxh3 + ")";
  for (const auto& t : m.tensors) {
    if (t.shard != static_cast<int>(s) || t.offset < 0 || t.offset + t.nbytes > size) continue;
    std::string sum = range_checksum(path, t.offset, t.nbytes);
    if (sum != t.xxh3)
      throw Error(what + ": tensor " + t.name + ": checksum mismatch (data " + sum + ", manifest " + t.xxh3 + ")");
  }
  throw Error(what + ": the damage is outside the tensor data (HDF5 metadata), or the file was replaced");
}

}  // namespace

// verify_checkpoint less the escaping of its error line.
Manifest verify_impl(const std::string& step_dir,
                     const std::function<void(const TensorEntry&, at::Tensor)>& visit);

std::string resolve_checkpoint_path(const std::string& in) {
  fs::path path(in);
  if (path.has_relative_path() && !path.has_filename()) path = path.parent_path();  // "DIR/"
  if (path.filename() == "latest" && fs::is_regular_file(path)) return follow_latest(path);
  if (fs::exists(path / "manifest.json")) return path.string();
  if (fs::is_regular_file(path / "latest")) return follow_latest(path / "latest");
  if (!fs::exists(path)) throw Error("checkpoint " + in + " does not exist");
  if (fs::is_directory(path) && path.filename().string().rfind("step-", 0) == 0)
    return path.string();  // a step dir without manifest: verify reports the missing manifest
  throw Error(in + " is neither a checkpoint step directory nor a checkpoint root with `latest`");
}

std::string merged_format_of(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  if (ext == ".h5" || ext == ".hdf5") return "h5";
  if (ext == ".pt" || ext == ".pth") return "pt";
  if (ext == ".safetensors") return "safetensors";
  return "";
}

bool is_merged_file(const std::string& path) {
  return fs::is_regular_file(path) && !merged_format_of(path).empty();
}

nlohmann::json meta_from_merged(const nlohmann::json& stored) {
  nlohmann::json meta = stored.contains("meta") ? stored["meta"] : nlohmann::json::object();
  for (const char* k : {"step", "world_size", "versions", "tensor_xxh3"})
    if (stored.contains(k)) meta[k] = stored[k];
  return meta;
}

void check_merged_checksums(CheckpointState& st, const std::string& path) {
  if (!st.meta.contains("tensor_xxh3")) return;
  nlohmann::json sums = st.meta["tensor_xxh3"];
  st.meta.erase("tensor_xxh3");
  if (!sums.is_object()) throw Error(path + ": malformed tensor_xxh3 in its metadata");
  for (const auto& [name, t] : st.tensors) {
    if (!sums.contains(name) || !sums[name].is_string()) continue;
    std::string sum = checksum(t.contiguous());
    if (sum != sums[name].get<std::string>())
      throw Error(path + ": tensor " + printable(name) + ": checksum mismatch (data " + sum + ", metadata " +
                  printable(sums[name].get<std::string>()) + ")");
  }
}

Manifest verify_checkpoint(const std::string& step_dir,
                           const std::function<void(const TensorEntry&, at::Tensor)>& visit) {
  try {
    return verify_impl(step_dir, visit);
  } catch (const Error& e) {
    throw Error(printable(e.what()));  // names and strings from damaged files: no raw bytes
  }
}

Manifest verify_impl(const std::string& step_dir,
                     const std::function<void(const TensorEntry&, at::Tensor)>& visit) {
  Manifest m = read_manifest(step_dir);
  for (size_t s = 0; s < m.shards.size(); ++s) {
    std::string path = step_dir + "/" + m.shards[s].file;
    if (!fs::exists(path))
      throw Error("checkpoint " + step_dir + ": shard file " + m.shards[s].file + " is missing");
    check_shard_file(path, m, s);
    h5::Handle file = open_h5(path);
    std::set<std::string> expected;
    for (const auto& e : m.tensors) {
      if (e.shard != static_cast<int>(s)) continue;
      expected.insert(e.name);
      at::Tensor t;
      try {
        t = read_tensor(file.get(), e.name);
      } catch (const Error& err) {
        throw Error(path + ": tensor " + printable(e.name) + ": " + err.what());
      }
      std::string dt = stored_dtype_name(t.scalar_type());
      if (dt != e.dtype)
        throw Error(path + ": tensor " + e.name + " has dtype " + dt + ", manifest says " + printable(e.dtype));
      if (t.sizes().vec() != e.shape)
        throw Error(path + ": tensor " + e.name + " has shape " + c10::str(t.sizes()) +
                    ", manifest says " + c10::str(c10::IntArrayRef(e.shape)));
      std::string sum = checksum(t);
      if (sum != e.xxh3)
        throw Error(path + ": tensor " + e.name + ": checksum mismatch (data " + sum +
                    ", manifest " + e.xxh3 + ")");
      if (visit) visit(e, std::move(t));
    }
    for (const auto& name : list_datasets(file.get()))
      if (!expected.count(name))
        throw Error(path + ": unexpected dataset " + printable(name) + " (not in the manifest)");
  }
  return m;
}

CheckpointState read_merged(const std::string& path) {
  h5::Handle file = open_h5(path);
  CheckpointState st;
  for (const auto& name : list_datasets(file.get())) {
    try {
      st.tensors.emplace_back(name, read_tensor(file.get(), name));
    } catch (const Error& err) {
      throw Error(path + ": tensor " + printable(name) + ": " + err.what());
    }
  }
  std::string s;
  if (h5::read_attr_string(file.get(), "hpctrain_meta", &s)) {
    nlohmann::json j = nlohmann::json::parse(s, nullptr, false);
    if (j.is_discarded()) throw Error(path + ": attribute hpctrain_meta is not JSON");
    st.meta = meta_from_merged(j);
  }
  return st;
}

}  // namespace hpctrain::ckpt

namespace hpctrain::ckpt {

CheckpointState read_impl(const std::string& path, c10::Device device) {
  CheckpointState st;
  std::string format = is_merged_file(path) ? merged_format_of(path) : "";
  if (format == "h5") {
    st = read_merged(path);
  } else if (format == "pt") {
    st = read_pt_file(path);
  } else if (format == "safetensors") {
    st = read_safetensors(path);
  } else {
    Manifest m = verify_checkpoint(
        resolve_checkpoint_path(path),
        [&](const TensorEntry& e, at::Tensor t) { st.tensors.emplace_back(e.name, std::move(t)); });
    st.meta = m.meta;
    st.meta["step"] = m.step;
    st.meta["world_size"] = m.world_size;
    st.meta["versions"] = m.versions;
  }
  check_merged_checksums(st, path);
  if (!device.is_cpu())
    for (auto& [name, t] : st.tensors) t = t.to(device);
  return st;
}

}  // namespace hpctrain::ckpt

namespace hpctrain {

CheckpointState read_checkpoint(const std::string& path, c10::Device device) {
  try {
    return ckpt::read_impl(path, device);
  } catch (const Error& e) {
    throw Error(ckpt::printable(e.what()));
  }
}

std::optional<std::string> find_resume(const std::string& dir, const std::string& mode) {
  if (mode == "none") return std::nullopt;
  if (mode != "auto") {
    try {
      std::string p = ckpt::resolve_checkpoint_path(mode);
      ckpt::verify_checkpoint(p);
      return p;
    } catch (const Error& e) {
      throw Error(std::string("--resume ") + mode + ": " + ckpt::printable(e.what()));
    }
  }
  auto all = ckpt::complete_checkpoints(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      ckpt::verify_checkpoint(it->second);
      return it->second;
    } catch (const Error& e) {
      std::fprintf(stderr, "hpctrain: WARNING: skipping checkpoint %s: %s; trying the previous one\n",
                   it->second.c_str(), e.what());
    }
  }
  return std::nullopt;
}

}  // namespace hpctrain
