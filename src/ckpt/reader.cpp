#include "ckpt/reader.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "ckpt/dir_ops.h"
#include "ckpt/h5_tensor.h"
#include "ckpt/pt_archive.h"
#include "runtime/check.h"

namespace fs = std::filesystem;

namespace hpctrain::ckpt {

std::string resolve_checkpoint_path(const std::string& path) {
  if (fs::exists(fs::path(path) / "manifest.json")) return path;
  fs::path latest = fs::path(path) / "latest";
  if (fs::exists(latest)) {
    std::ifstream in(latest);
    std::string name;
    in >> name;
    if (name.empty()) throw Error(latest.string() + " is empty");
    return (fs::path(path) / name).string();
  }
  if (!fs::exists(path)) throw Error("checkpoint " + path + " does not exist");
  if (fs::is_directory(path) && fs::path(path).filename().string().rfind("step-", 0) == 0)
    return path;  // a step dir without manifest: verify reports the missing manifest
  throw Error(path + " is neither a checkpoint step directory nor a checkpoint root with `latest`");
}

bool is_merged_file(const std::string& path) {
  return fs::is_regular_file(path) && fs::path(path).extension() == ".h5";
}

bool is_pt_file(const std::string& path) {
  return fs::is_regular_file(path) && fs::path(path).extension() == ".pt";
}

nlohmann::json meta_from_merged(const nlohmann::json& stored) {
  nlohmann::json meta = stored.contains("meta") ? stored["meta"] : nlohmann::json::object();
  for (const char* k : {"step", "world_size", "versions"})
    if (stored.contains(k)) meta[k] = stored[k];
  return meta;
}

Manifest verify_checkpoint(const std::string& step_dir,
                           const std::function<void(const TensorEntry&, at::Tensor)>& visit) {
  Manifest m = read_manifest(step_dir);
  for (size_t s = 0; s < m.shards.size(); ++s) {
    std::string path = step_dir + "/" + m.shards[s];
    if (!fs::exists(path))
      throw Error("checkpoint " + step_dir + ": shard file " + m.shards[s] + " is missing");
    H5Id file = open_h5(path);
    std::set<std::string> expected;
    for (const auto& e : m.tensors) {
      if (e.shard != static_cast<int>(s)) continue;
      expected.insert(e.name);
      at::Tensor t;
      try {
        t = read_tensor(file, e.name);
      } catch (const Error& err) {
        throw Error(path + ": tensor " + e.name + ": " + err.what());
      }
      std::string dt = dtype_name(t.scalar_type());
      if (dt != e.dtype)
        throw Error(path + ": tensor " + e.name + " has dtype " + dt + ", manifest says " + e.dtype);
      if (t.sizes().vec() != e.shape)
        throw Error(path + ": tensor " + e.name + " has shape " + c10::str(t.sizes()) +
                    ", manifest says " + c10::str(c10::IntArrayRef(e.shape)));
      std::string sum = checksum(t);
      if (sum != e.xxh3)
        throw Error(path + ": tensor " + e.name + ": checksum mismatch (data " + sum +
                    ", manifest " + e.xxh3 + ")");
      if (visit) visit(e, std::move(t));
    }
    for (const auto& name : list_datasets(file))
      if (!expected.count(name))
        throw Error(path + ": unexpected dataset " + name + " (not in the manifest)");
  }
  return m;
}

CheckpointState read_merged(const std::string& path) {
  H5Id file = open_h5(path);
  CheckpointState st;
  for (const auto& name : list_datasets(file)) {
    try {
      st.tensors.emplace_back(name, read_tensor(file, name));
    } catch (const Error& err) {
      throw Error(path + ": tensor " + name + ": " + err.what());
    }
  }
  if (H5Aexists(file, "hpctrain_meta") > 0) {
    H5Id attr(H5Aopen(file, "hpctrain_meta", H5P_DEFAULT), H5Aclose);
    H5Id type(H5Aget_type(attr), H5Tclose);
    std::string s(H5Tget_size(type), '\0');
    H5Aread(attr, type, s.data());
    s.resize(std::strlen(s.c_str()));
    nlohmann::json j = nlohmann::json::parse(s, nullptr, false);
    if (j.is_discarded()) throw Error(path + ": attribute hpctrain_meta is not JSON");
    st.meta = meta_from_merged(j);
  }
  return st;
}

}  // namespace hpctrain::ckpt

namespace hpctrain {

CheckpointState read_checkpoint(const std::string& path, c10::Device device) {
  CheckpointState st;
  if (ckpt::is_merged_file(path)) {
    st = ckpt::read_merged(path);
  } else if (ckpt::is_pt_file(path)) {
    st = ckpt::read_pt(path);
  } else {
    ckpt::Manifest m = ckpt::verify_checkpoint(
        ckpt::resolve_checkpoint_path(path),
        [&](const ckpt::TensorEntry& e, at::Tensor t) { st.tensors.emplace_back(e.name, std::move(t)); });
    st.meta = m.meta;
    st.meta["step"] = m.step;
    st.meta["world_size"] = m.world_size;
    st.meta["versions"] = m.versions;
  }
  if (!device.is_cpu())
    for (auto& [name, t] : st.tensors) t = t.to(device);
  return st;
}

std::optional<std::string> find_resume(const std::string& dir, const std::string& mode) {
  if (mode == "none") return std::nullopt;
  if (mode != "auto") {
    try {
      std::string p = ckpt::resolve_checkpoint_path(mode);
      ckpt::verify_checkpoint(p);
      return p;
    } catch (const Error& e) {
      throw Error(std::string("--resume ") + mode + ": " + e.what());
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
