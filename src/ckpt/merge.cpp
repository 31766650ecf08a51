// ckpt merge: planned from the manifest (ckpt/merge_plan.h), then streamed one tensor at a time
// into the chosen format's writer (ckpt/merged_writer.h) as verify_checkpoint hands each over;
// out.tmp is renamed durably. ckpt inspect reads the manifest only.
#include "ckpt/merge.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <unordered_map>

#include "ckpt/checksum.h"
#include "ckpt/merge_plan.h"
#include "ckpt/dir_ops.h"
#include "ckpt/merged_file.h"
#include "ckpt/resolve.h"
#include "ckpt/formats/torchscript_archive.h"
#include "ckpt/verify.h"
#include "runtime/check.h"

namespace hpctrain::ckpt {
namespace {

// What a merged file stores as its metadata: the manifest less its tensor and shard tables,
// plus the checksum of every tensor as written (names with "model/" in every format).
nlohmann::json merged_meta(const MergePlan& plan, const std::string& prefix) {
  nlohmann::json meta = plan.meta;
  nlohmann::json sums = nlohmann::json::object();
  for (const auto& item : plan.items) sums[prefix + item.out.name] = item.xxh3;
  meta["tensor_xxh3"] = sums;
  return meta;
}

// The checksums the manifest cannot tell (cast or unsharded tensors), computed by streaming
// each such tensor once, while verify_checkpoint checks every shard; the tensors verify does
// not hand over (unsharded state, tied aliases) are read afterwards.
void compute_checksums(const std::string& dir, MergePlan& plan, MergeSource& src) {
  std::unordered_map<std::string, size_t> visit;
  for (size_t i = 0; i < plan.items.size(); ++i)
    if (plan.items[i].from == MergeItem::From::kVisit) visit[plan.items[i].source] = i;
  verify_checkpoint(dir, [&](const TensorEntry& e, at::Tensor t) {
    auto it = visit.find(e.name);
    if (it != visit.end() && plan.items[it->second].xxh3.empty())
      plan.items[it->second].xxh3 = checksum(src.cast(std::move(t)));
  });
  for (auto& item : plan.items) {
    if (!item.xxh3.empty()) continue;
    auto it = item.from == MergeItem::From::kReread ? visit.find(item.source) : visit.end();
    item.xxh3 = it != visit.end() ? plan.items[it->second].xxh3 : checksum(src.read(item));
  }
}

// Every planned tensor into `w`, one at a time. `verified`: the shards were checked already
// (compute_checksums), so each tensor is read from its shard; otherwise verify_checkpoint
// hands them over and the few it does not (tied aliases, unsharded state) are read in between.
void stream_tensors(const std::string& dir, const MergePlan& plan, MergeSource& src, bool verified,
                    MergedFileWriter& w) {
  const auto& items = plan.items;
  size_t next = 0;
  auto read_up_to_visit = [&] {
    while (next < items.size() && (verified || items[next].from != MergeItem::From::kVisit)) {
      w.add(src.read(items[next++]));
    }
  };
  if (!verified)
    verify_checkpoint(dir, [&](const TensorEntry& e, at::Tensor t) {
      read_up_to_visit();
      if (next < items.size() && items[next].from == MergeItem::From::kVisit && items[next].source == e.name) {
        w.add(src.cast(std::move(t)));
        ++next;
      }
    });
  read_up_to_visit();
  if (next != items.size())
    throw Error("checkpoint " + dir + ": tensor " + items[next].source + " was not read (the manifest changed?)");
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
  std::string dir = resolve_checkpoint_path(path);
  Manifest m = read_manifest(dir);
  MergePlan plan = plan_merge(m, opts, prefixed, dir);
  MergeSource src(dir, m, plan);
  bool verified = std::any_of(plan.items.begin(), plan.items.end(), [](const MergeItem& i) { return i.xxh3.empty(); });
  if (verified) compute_checksums(dir, plan, src);
  rep.kept = plan.kept;
  rep.tensors = plan.items.size();
  nlohmann::json meta = merged_meta(plan, prefixed ? "" : "model/");
  std::vector<TensorSpec> specs;
  for (const auto& item : plan.items) specs.push_back(item.out);
  const MergedFileFormat* f = merged_file_format(rep.format);
  MergedWriterOpen open = f ? f->open : open_torchscript;
  std::string tmp = out + ".tmp";
  try {
    {
      std::unique_ptr<MergedFileWriter> w = open(tmp, meta, std::move(specs));
      stream_tensors(dir, plan, src, verified, *w);
      w->close();
    }
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
