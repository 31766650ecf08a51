// The table of single-file checkpoint formats, and what they share: extension sniffing, the
// metadata view, the per-tensor checksums of `ckpt merge`.
#include "ckpt/merged_file.h"

#include <filesystem>

#include "ckpt/checksum.h"
#include "ckpt/merged_h5.h"
#include "ckpt/formats/safetensors.h"
#include "ckpt/formats/state_dict_pt.h"
#include "runtime/check.h"
#include "runtime/tensor_text.h"

namespace fs = std::filesystem;

namespace hpctrain::ckpt {

const std::vector<MergedFileFormat>& merged_file_formats() {
  static const std::vector<MergedFileFormat> formats = {
      {"h5", {".h5", ".hdf5"}, open_merged_h5, read_merged_h5},
      {"pt", {".pt", ".pth"}, open_state_dict_pt, read_pt_file},
      {"safetensors", {".safetensors"}, open_safetensors, read_safetensors},
  };
  return formats;
}

const MergedFileFormat* merged_file_format(const std::string& name) {
  for (const auto& f : merged_file_formats())
    if (f.name == name) return &f;
  return nullptr;
}

std::string merged_format_of(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  for (const auto& f : merged_file_formats())
    for (const auto& e : f.extensions)
      if (e == ext) return f.name;
  return "";
}

bool is_merged_file(const std::string& path) { return fs::is_regular_file(path) && !merged_format_of(path).empty(); }

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

}  // namespace hpctrain::ckpt
