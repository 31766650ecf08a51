// manifest.json to and from Manifest, every field checked on reading (checksums 16 hex digits,
// shard names without '/', shard indices in range; version 1 still read), plus the shard and
// step names and plan_shards, which packs tensors in order.
#include "ckpt/manifest.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ckpt/checksum.h"
#include "io/h5_util.h"
#include "runtime/check.h"
#include "runtime/tensor_text.h"
#include "runtime/versions.h"

namespace hpctrain::ckpt {

nlohmann::json Manifest::to_json() const {
  nlohmann::json ts = nlohmann::json::array();
  for (const auto& t : tensors) {
    ts.push_back({{"name", t.name},
                  {"shard", t.shard},
                  {"dtype", t.dtype},
                  {"shape", t.shape},
                  {"nbytes", t.nbytes},
                  {"xxh3", t.xxh3}});
    if (t.offset >= 0) ts.back()["offset"] = t.offset;
  }
  nlohmann::json ss = nlohmann::json::array();
  for (const auto& s : shards) ss.push_back({{"file", s.file}, {"bytes", s.bytes}, {"xxh3", s.xxh3}});
  nlohmann::json j = {{"format", "hpctrain-checkpoint"},
                      {"format_version", format_version},
                      {"step", step},
                      {"world_size", world_size},
                      {"versions", versions},
                      {"meta", meta},
                      {"shards", ss},
                      {"tensors", ts}};
  if (meta.contains("epoch")) j["epoch"] = meta["epoch"];
  return j;
}

Manifest Manifest::from_json(const nlohmann::json& j, const std::string& source) {
  try {
    if (j.value("format", "") != "hpctrain-checkpoint") throw Error(source + ": not an hpctrain checkpoint manifest");
    Manifest m;
    m.format_version = j.at("format_version").get<int>();
    if (m.format_version != 1 && m.format_version != 2)
      throw Error(source + ": unsupported format_version " + std::to_string(m.format_version));
    m.step = j.at("step").get<int64_t>();
    m.world_size = j.at("world_size").get<int>();
    m.versions = j.value("versions", nlohmann::json::object());
    m.meta = j.value("meta", nlohmann::json::object());
    for (const auto& s : j.at("shards")) {
      ShardEntry e;
      if (m.format_version == 1) {
        e.file = s.get<std::string>();
      } else {
        e = {s.at("file").get<std::string>(), s.at("bytes").get<int64_t>(), s.at("xxh3").get<std::string>()};
        if (!is_hex64(e.xxh3) || e.bytes < 0)
          throw Error(source + ": shard " + printable(e.file) +
                      ": malformed checksum or size in the manifest (xxh3 \"" + printable(e.xxh3) + "\", bytes " +
                      std::to_string(e.bytes) + "; expected 16 hex digits and bytes >= 0)");
      }
      if (e.file.empty() || e.file.find('/') != std::string::npos || e.file == "." || e.file == "..")
        throw Error(source + ": malformed shard file name \"" + printable(e.file) + "\"");
      m.shards.push_back(std::move(e));
    }
    for (const auto& t : j.at("tensors")) {
      TensorEntry e{t.at("name").get<std::string>(),  t.at("shard").get<int>(),
                    t.at("dtype").get<std::string>(), t.at("shape").get<std::vector<int64_t>>(),
                    t.at("nbytes").get<int64_t>(),    t.at("xxh3").get<std::string>(),
                    t.value("offset", int64_t{-1})};
      if (!is_hex64(e.xxh3))
        throw Error(source + ": tensor " + printable(e.name) + ": malformed checksum \"" + printable(e.xxh3) +
                    "\" in the manifest (expected 16 hex digits)");
      if (e.shard < 0 || e.shard >= static_cast<int>(m.shards.size()))
        throw Error(source + ": tensor " + e.name + " names shard " + std::to_string(e.shard) + " of " +
                    std::to_string(m.shards.size()));
      m.tensors.push_back(std::move(e));
    }
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": malformed manifest: " + printable(e.what()));
  }
}

Manifest read_manifest(const std::string& dir) {
  std::string path = dir + "/manifest.json";
  if (!std::filesystem::exists(path)) throw Error("no manifest.json in " + dir + " (incomplete checkpoint?)");
  std::ifstream in(path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": not valid JSON: " + printable(e.what()));
  }
  return Manifest::from_json(j, path);
}

std::string shard_file_name(int index, int count) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "shard-%05d-of-%05d.h5", index, count);
  return buf;
}

std::string step_dir_name(int64_t step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

std::vector<int> plan_shards(const std::vector<int64_t>& nbytes, int64_t cap) {
  std::vector<int> out(nbytes.size());
  int shard = 0;
  int64_t used = 0;
  bool open = false;  // the current shard holds at least one tensor
  for (size_t i = 0; i < nbytes.size(); ++i) {
    if (open && used + nbytes[i] > cap) {
      ++shard;
      used = 0;
      open = false;
    }
    out[i] = shard;
    used += nbytes[i];
    open = true;
  }
  return out;
}

nlohmann::json library_versions() {
  nlohmann::json v = hpctrain::library_versions();
  v["hdf5"] = h5::library_version();
  return v;
}

}  // namespace hpctrain::ckpt
