#include "ckpt/merge.h"

#include <ATen/ATen.h>

#include <cstdio>

#include "ckpt/dir_ops.h"
#include "ckpt/h5_tensor.h"
#include "ckpt/pt_archive.h"
#include "ckpt/reader.h"
#include "runtime/check.h"

namespace hpctrain::ckpt {
namespace {

at::Tensor cast_for_deploy(const at::Tensor& t, const std::string& dtype) {
  if (dtype.empty() || !at::isFloatingType(t.scalar_type())) return t;
  if (dtype == "fp16") return t.to(at::kHalf);
  if (dtype == "bf16") return t.to(at::kBFloat16);
  throw Error("ckpt merge: --dtype must be fp16 or bf16, got " + dtype);
}

// What a merged file stores as its metadata: the manifest less its tensor and shard tables.
nlohmann::json merged_meta(const Manifest& m) {
  nlohmann::json meta = m.to_json();
  meta.erase("tensors");
  meta.erase("shards");
  return meta;
}

}  // namespace

void merge_checkpoint(const std::string& path, const std::string& out, const MergeOptions& opts) {
  if (opts.format != "h5" && opts.format != "pt")
    throw Error("ckpt merge: --format must be h5 or pt, got " + opts.format);
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  std::string dir = resolve_checkpoint_path(path);
  Manifest m = verify_checkpoint(dir, [&](const TensorEntry& e, at::Tensor t) {
    bool model = e.name.rfind("model/", 0) == 0;
    if (model || (opts.full && opts.format == "h5"))
      tensors.emplace_back(model && opts.format == "pt" ? e.name.substr(6) : e.name,
                           cast_for_deploy(t, opts.dtype).contiguous());
  });
  std::string tmp = out + ".tmp";
  if (opts.format == "pt") {
    write_pt(tmp, merged_meta(m), tensors);
  } else {
    H5Id file = create_h5(tmp);
    for (const auto& [name, t] : tensors) write_tensor(file, name, t, false);
    std::string s = merged_meta(m).dump();
    H5Id str(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(str, s.size());
    H5Id space(H5Screate(H5S_SCALAR), H5Sclose);
    H5Id attr(H5Acreate2(file, "hpctrain_meta", str, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    if (attr.get() < 0 || H5Awrite(attr, str, s.data()) < 0) throw Error("cannot write metadata to " + tmp);
    attr.reset();
    close_and_sync(file, tmp);
  }
  rename_durable(tmp, out);
}

std::string inspect_checkpoint(const std::string& path) {
  std::string dir = resolve_checkpoint_path(path);
  Manifest m = read_manifest(dir);
  std::string s;
  char line[512];
  auto add = [&](const char* fmt, auto... args) {
    std::snprintf(line, sizeof line, fmt, args...);
    s += line;
  };
  add("checkpoint %s\n", dir.c_str());
  add("step %lld, epoch %s, world size at save %d\n", static_cast<long long>(m.step),
      m.meta.contains("epoch") ? m.meta["epoch"].dump().c_str() : "?", m.world_size);
  add("versions: %s\n", m.versions.dump().c_str());
  if (m.meta.contains("config")) {
    std::string cfg;
    for (auto& [k, v] : m.meta["config"].items()) cfg += (cfg.empty() ? "" : " ") + k + "=" + v.dump();
    s += "config: " + cfg + "\n";
  }
  int64_t total = 0;
  add("%-48s %-9s %-20s %-6s %12s\n", "tensor", "dtype", "shape", "shard", "bytes");
  for (const auto& e : m.tensors) {
    std::string shape = c10::str(c10::IntArrayRef(e.shape));
    add("%-48s %-9s %-20s %-6d %12lld\n", e.name.c_str(), e.dtype.c_str(), shape.c_str(), e.shard,
        static_cast<long long>(e.nbytes));
    total += e.nbytes;
  }
  add("%zu tensors, %zu shards, %lld bytes\n", m.tensors.size(), m.shards.size(), static_cast<long long>(total));
  return s;
}

}  // namespace hpctrain::ckpt
