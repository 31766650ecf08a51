// ckpt merge: verify_checkpoint hands over each tensor (cast with --dtype), --full unshards a
// ZeRO-1 optimizer state, and the chosen format writes out.tmp, which is renamed durably.
// ckpt inspect reads the manifest only.
#include "ckpt/merge.h"
#include "ckpt/zero_state.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "ckpt/checksum.h"
#include "ckpt/dir_ops.h"
#include "ckpt/merged_file.h"
#include "ckpt/resolve.h"
#include "ckpt/formats/torchscript_archive.h"
#include "ckpt/verify.h"
#include "runtime/check.h"

namespace hpctrain::ckpt {
namespace {

// What a merged file stores as its metadata: the manifest less its tensor and shard tables,
// plus the checksum of every tensor as written.
nlohmann::json merged_meta(const Manifest& m, const NamedTensors& tensors, const std::string& prefix) {
  nlohmann::json meta = m.to_json();
  meta.erase("tensors");
  meta.erase("shards");
  nlohmann::json sums = nlohmann::json::object();
  for (const auto& [name, t] : tensors) sums[prefix + name] = checksum(t);
  meta["tensor_xxh3"] = sums;
  return meta;
}

// A merged file holds every name of the model's state, as PyTorch's state_dict() does: a tied
// tensor (stored once, its other names in meta "tied": {alias: name}) once more under each alias,
// right after the model tensors, so that load_state_dict(strict=True) finds every key.
void add_tied_names(NamedTensors& tensors, const nlohmann::json& meta, const std::string& prefix) {
  if (!meta.contains("tied") || !meta["tied"].is_object()) return;
  size_t end = 0;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (prefix.empty() || tensors[i].first.rfind(prefix, 0) == 0) end = i + 1;
  NamedTensors extra;
  for (const auto& [alias, name] : meta["tied"].items()) {
    auto it = std::find_if(tensors.begin(), tensors.end(), [&](const auto& nt) { return nt.first == prefix + name.get<std::string>(); });
    if (it == tensors.end())
      throw Error("checkpoint metadata names " + alias + " a tied name of " + name.get<std::string>() +
                  ", which the checkpoint does not hold");
    extra.emplace_back(prefix + alias, it->second.clone());
  }
  tensors.insert(tensors.begin() + static_cast<std::ptrdiff_t>(end), extra.begin(), extra.end());
}

}  // namespace

std::string merge_format(const std::string& out, const std::string& format) {
  std::string ext = std::filesystem::path(out).extension().string();
  std::string by_ext = merged_format_of(out);
  if (format.empty()) {
    if (by_ext.empty())
      throw Error("cannot tell the format of " + out + " from its extension '" + ext +
                  "': use .h5, .pt, .pth or .safetensors, or --format h5|pt|safetensors|torchscript");
    return by_ext;
  }
  if (format != "h5" && format != "pt" && format != "safetensors" && format != "torchscript")
    throw Error("--format must be h5, pt, safetensors or torchscript, got " + format);
  bool agrees = by_ext.empty() || by_ext == format || (format == "torchscript" && by_ext == "pt");
  if (!agrees)
    throw Error("--format " + format + " contradicts the extension of " + out + " (" + ext + " is " + by_ext +
                "); change one of them");
  return format;
}

MergeReport merge_checkpoint(const std::string& path, const std::string& out, const MergeOptions& opts) {
  MergeReport rep;
  rep.format = merge_format(out, opts.format);
  if (!opts.dtype.empty() && opts.dtype != "fp16" && opts.dtype != "bf16")
    throw Error("--dtype must be fp16 or bf16, got " + opts.dtype);
  if (opts.full && rep.format != "h5")
    throw Error("--full (optimizer and trainer state) needs an .h5 output; a " + rep.format +
                " file holds the model's state dict");
  std::filesystem::path parent = std::filesystem::path(out).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent))
    throw Error("the directory of --out " + out + " does not exist");
  bool prefixed = rep.format == "h5";
  at::ScalarType cast = opts.dtype == "fp16" ? at::kHalf : at::kBFloat16;
  NamedTensors tensors;
  std::string dir = resolve_checkpoint_path(path);
  Manifest m = verify_checkpoint(dir, [&](const TensorEntry& e, at::Tensor t) {
    bool model = e.name.rfind("model/", 0) == 0;
    if (!model && !opts.full) return;
    if (!opts.dtype.empty()) {
      if (at::isFloatingType(t.scalar_type()))
        t = t.to(cast);
      else
        rep.kept.push_back(e.name + " (" + e.dtype + ")");
    }
    tensors.emplace_back(prefixed ? e.name : e.name.substr(6), t.contiguous());
  });
  if (opts.full && m.meta.contains("zero")) {
    // A ZeRO-1 checkpoint: the whole optimizer state, per parameter, as a DDP run saves it.
    CheckpointState st;
    st.tensors = std::move(tensors);
    st.meta = m.meta;
    unshard_optimizer_state(st, dir);
    tensors = std::move(st.tensors);
    m.meta = std::move(st.meta);
  }
  add_tied_names(tensors, m.meta, prefixed ? "model/" : "");
  rep.tensors = tensors.size();
  nlohmann::json meta = merged_meta(m, tensors, prefixed ? "" : "model/");
  std::string tmp = out + ".tmp";
  try {
    if (const MergedFileFormat* f = merged_file_format(rep.format))
      f->write(tmp, meta, tensors);
    else
      write_torchscript(tmp, meta, tensors);
    rename_durable(tmp, out);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw;
  }
  return rep;
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
  for (const auto& sh : m.shards)
    add("  %s  %lld bytes  xxh3 %s\n", sh.file.c_str(), static_cast<long long>(sh.bytes),
        sh.xxh3.empty() ? "- (format version 1)" : sh.xxh3.c_str());
  return s;
}

}  // namespace hpctrain::ckpt
