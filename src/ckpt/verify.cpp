// Checkpoint verification: shard files by size and whole-file checksum before HDF5 reads them,
// then every tensor's dtype, shape and checksum against the manifest.
#include "ckpt/verify.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "ckpt/checksum.h"
#include "ckpt/dir_ops.h"
#include "ckpt/h5_image.h"
#include "io/h5_tensor.h"
#include "runtime/check.h"
#include "runtime/tensor_text.h"

namespace fs = std::filesystem;

namespace hpctrain::ckpt {
namespace {

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
    throw Error(path + ": file is " + std::to_string(size) + " bytes, the manifest says " + std::to_string(e.bytes) +
                " (truncated, or replaced by another file)");
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

// verify_checkpoint less the escaping of its error line.
Manifest verify_impl(const std::string& step_dir, const std::function<void(const TensorEntry&, at::Tensor)>& visit) {
  Manifest m = read_manifest(step_dir);
  for (size_t s = 0; s < m.shards.size(); ++s) {
    std::string path = step_dir + "/" + m.shards[s].file;
    if (!fs::exists(path)) throw Error("checkpoint " + step_dir + ": shard file " + m.shards[s].file + " is missing");
    check_shard_file(path, m, s);
    h5::Handle file = h5::open_h5(path);
    std::set<std::string> expected;
    for (const auto& e : m.tensors) {
      if (e.shard != static_cast<int>(s)) continue;
      expected.insert(e.name);
      at::Tensor t;
      try {
        t = h5::read_tensor(file.get(), e.name);
      } catch (const Error& err) {
        throw Error(path + ": tensor " + printable(e.name) + ": " + err.what());
      }
      std::string dt = h5::stored_dtype_name(t.scalar_type());
      if (dt != e.dtype)
        throw Error(path + ": tensor " + e.name + " has dtype " + dt + ", manifest says " + printable(e.dtype));
      if (t.sizes().vec() != e.shape)
        throw Error(path + ": tensor " + e.name + " has shape " + c10::str(t.sizes()) + ", manifest says " +
                    c10::str(c10::IntArrayRef(e.shape)));
      std::string sum = checksum(t);
      if (sum != e.xxh3)
        throw Error(path + ": tensor " + e.name + ": checksum mismatch (data " + sum + ", manifest " + e.xxh3 + ")");
      if (visit) visit(e, std::move(t));
    }
    for (const auto& name : h5::list_datasets(file.get()))
      if (!expected.count(name))
        throw Error(path + ": unexpected dataset " + printable(name) + " (not in the manifest)");
  }
  return m;
}

}  // namespace

Manifest verify_checkpoint(const std::string& step_dir,
                           const std::function<void(const TensorEntry&, at::Tensor)>& visit) {
  try {
    return verify_impl(step_dir, visit);
  } catch (const Error& e) {
    throw Error(printable(e.what()));  // names and strings from damaged files: no raw bytes
  }
}

}  // namespace hpctrain::ckpt
