// The checkpoint write steps: host snapshots (reusing an earlier snapshot's buffers), the
// manifest plan, shard s written by writer s % nwriters, and a commit that does every write
// before the first fsync and publishes by renaming step-N.tmp.
#include "ckpt/store.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <set>

#include "ckpt/checksum.h"
#include "ckpt/dir_ops.h"
#include "ckpt/h5_image.h"
#include "io/h5_tensor.h"
#include "runtime/check.h"

namespace fs = std::filesystem;

namespace hpctrain::ckpt {

void check_snapshot(const NamedTensors& tensors) {
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    auto slash = name.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == name.size())
      throw Error("checkpoint: tensor name '" + name + "' must be <group>/<name> (model/, optim/, state/)");
    if (!seen.insert(name).second) throw Error("checkpoint: duplicate tensor name " + name);
    if (!t.defined()) throw Error("checkpoint: tensor " + name + " is undefined");
    h5::stored_dtype_name(t.scalar_type());  // rejects unsupported dtypes early, naming them
  }
}

NamedTensors snapshot_to_host(const NamedTensors& tensors, bool copy_cpu, NamedTensors* reuse) {
  check_snapshot(tensors);
  // The same model saves the same tensor list every time, so index i usually matches.
  auto recycled = [&](size_t i, const std::string& name, const at::Tensor& src) -> at::Tensor {
    if (!reuse || i >= reuse->size() || (*reuse)[i].first != name) return {};
    const at::Tensor& b = (*reuse)[i].second;
    if (b.scalar_type() != src.scalar_type() || b.sizes() != src.sizes() || !b.is_contiguous() ||
        b.is_pinned() != src.is_cuda())
      return {};
    return b;
  };
  NamedTensors out;
  out.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    at::Tensor src = t.detach();
    if (!copy_cpu && src.device().is_cpu() && src.is_contiguous()) {
      out.emplace_back(name, src);
      continue;
    }
    at::Tensor host = recycled(out.size(), name, src);
    if (!host.defined())
      host = at::empty(src.sizes(), at::TensorOptions(src.scalar_type()).pinned_memory(src.is_cuda()));
    host.copy_(src);  // a copy even for CPU tensors: training goes on mutating them
    out.emplace_back(name, std::move(host));
  }
  if (reuse) reuse->clear();
  return out;
}

Manifest plan_manifest(int64_t step, const CheckpointState& state, int world_size, int64_t shard_mb) {
  if (shard_mb <= 0) throw Error("checkpoint: shard size must be > 0 MiB");
  Manifest m;
  m.step = step;
  m.world_size = world_size;
  m.meta = state.meta;
  m.versions = library_versions();
  std::vector<int64_t> sizes;
  for (const auto& [name, t] : state.tensors) sizes.push_back(static_cast<int64_t>(t.nbytes()));
  std::vector<int> shard = plan_shards(sizes, shard_mb << 20);
  int count = shard.empty() ? 1 : shard.back() + 1;
  for (int i = 0; i < count; ++i) m.shards.push_back({shard_file_name(i, count), -1, ""});
  for (size_t i = 0; i < state.tensors.size(); ++i) {
    const at::Tensor& t = state.tensors[i].second;
    m.tensors.push_back(
        {state.tensors[i].first, shard[i], h5::stored_dtype_name(t.scalar_type()), t.sizes().vec(), sizes[i], ""});
  }
  return m;
}

void fill_missing_checksums(Manifest& m, const NamedTensors& host) {
  for (size_t i = 0; i < m.tensors.size(); ++i)
    if (m.tensors[i].xxh3.empty()) m.tensors[i].xxh3 = checksum(host[i].second);
}

std::string tmp_dir_for(const std::string& dir, int64_t step) { return dir + "/" + step_dir_name(step) + ".tmp"; }

void write_shards(const std::string& tmp_dir, Manifest& m, const NamedTensors& host, int writer, int nwriters,
                  bool compress, bool sync) {
  std::error_code ec;
  fs::create_directories(tmp_dir, ec);
  if (ec) throw Error("cannot create " + tmp_dir + ": " + ec.message());
  std::vector<std::string> written;
  for (int s = 0; s < static_cast<int>(m.shards.size()); ++s) {
    if (s % nwriters != writer) continue;
    NamedTensors mine;
    std::vector<size_t> index;
    for (size_t i = 0; i < m.tensors.size(); ++i) {
      if (m.tensors[i].shard != s) continue;
      mine.emplace_back(m.tensors[i].name, host[i].second);
      index.push_back(i);
    }
    H5FileSpec spec;
    spec.tensors = &mine;
    spec.compress = compress;
    spec.sync = false;  // below, once every shard is written
    spec.after_first_dataset = [s] { fault_point("in_shard:" + std::to_string(s)); };
    written.push_back(tmp_dir + "/" + m.shards[s].file);
    WrittenFile w = write_h5_file(written.back(), spec);
    m.shards[s].bytes = w.bytes;
    m.shards[s].xxh3 = w.xxh3;
    for (size_t k = 0; k < index.size(); ++k) {
      m.tensors[index[k]].xxh3 = w.tensor_xxh3[k];
      m.tensors[index[k]].offset = w.tensor_offsets[k];
    }
    fault_point("after_shard:" + std::to_string(s));
  }
  if (sync)
    for (const auto& f : written) fsync_path(f);
}

void commit(const std::string& dir, const Manifest& m, int keep, bool shards_synced) {
  std::string tmp = tmp_dir_for(dir, m.step);
  std::string name = step_dir_name(m.step);
  fault_point("before_manifest");
  // No tmp-file-and-rename for the manifest: the step directory is still *.tmp, and its rename
  // below is what publishes the checkpoint. An fsync that finds changes is a journal commit
  // (1-4 ms on ext4 here: most of a small checkpoint's write time), so there are as few as the
  // commit needs (the files, the tmp dir's entries, the root once for both renames), and every
  // write comes before the first of them.
  write_file(tmp + "/manifest.json", m.to_json().dump(1) + "\n", false);
  write_file(dir + "/latest.tmp", name + "\n", false);
  if (!shards_synced)
    for (const auto& s : m.shards) fsync_path(tmp + "/" + s.file);
  fsync_path(tmp + "/manifest.json");
  fsync_path(dir + "/latest.tmp");
  fsync_path(tmp);
  fault_point("before_rename");
  std::string final_dir = dir + "/" + name;
  if (fs::exists(final_dir)) {
    // Re-saving a step (e.g. after resuming from it): retire the old one first, via *.tmp.
    rename_durable(final_dir, final_dir + ".old.tmp");
    fs::remove_all(final_dir + ".old.tmp");
  }
  rename_or_throw(tmp, final_dir);
  fault_point("before_latest");
  rename_or_throw(dir + "/latest.tmp", dir + "/latest");
  fsync_path(dir);
  fault_point("before_prune");
  prune(dir, keep);
}

void write_checkpoint_sync(const CheckpointOptions& opts, int64_t step, const CheckpointState& state, int world_size) {
  NamedTensors host = snapshot_to_host(state.tensors, /*copy_cpu=*/false);
  Manifest m = plan_manifest(step, state, world_size, opts.shard_mb);
  write_shards(tmp_dir_for(opts.dir, step), m, host, 0, 1, opts.compress, /*sync=*/false);
  commit(opts.dir, m, opts.keep, /*shards_synced=*/false);
}

}  // namespace hpctrain::ckpt
