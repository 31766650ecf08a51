// manifest.json: the index of one checkpoint (internal to src/ckpt; the JSON shape is the
// contract). Example:
//   {"format":"hpctrain-checkpoint","format_version":2,"step":400,"epoch":2,"world_size":2,
//    "versions":{"hpctrain":"0.1.0","libtorch":"2.15.0","mpi":"Open MPI v4.1.4","hdf5":"1.10.8"},
//    "meta":{...trainer's json...},
//    "shards":[{"file":"shard-00000-of-00002.h5","bytes":6612345,"xxh3":"04c1..."}, ...],
//    "tensors":[{"name":"model/fc.weight","shard":0,"dtype":"float32","shape":[10,256],
//                "nbytes":10240,"xxh3":"9f0c2a...","offset":4096}]}
// Shard "xxh3" is XXH3-64 over the whole file as written (every byte: HDF5 metadata too),
// tensor "xxh3" over the tensor's raw bytes; both 16 lowercase hex digits. A tensor's "offset"
// (absent when HDF5 chose it: compressed or empty) lets verify name the tensor a damaged shard
// holds without parsing the damaged file. Format version 1
// (shards as plain file names, no file checksums) is still read; its shards are then checked
// per tensor only.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hpctrain::ckpt {

struct TensorEntry {
  std::string name;
  int shard = 0;
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t nbytes = 0;
  std::string xxh3;     // 16 hex digits of XXH3_64bits over the tensor's raw bytes
  int64_t offset = -1;  // where its bytes lie in the shard file (-1: compressed, empty, or v1)
};

struct ShardEntry {
  std::string file;
  int64_t bytes = -1;  // -1 and "" for a version 1 manifest
  std::string xxh3;
};

struct Manifest {
  int format_version = 2;
  int64_t step = 0;
  int world_size = 1;
  nlohmann::json versions = nlohmann::json::object();
  nlohmann::json meta = nlohmann::json::object();
  std::vector<ShardEntry> shards;
  std::vector<TensorEntry> tensors;

  nlohmann::json to_json() const;
  // Throws hpctrain::Error naming `source` if a field is missing or malformed.
  static Manifest from_json(const nlohmann::json& j, const std::string& source);
};

// Reads DIR/manifest.json; a missing file is its own error ("no manifest.json in DIR").
Manifest read_manifest(const std::string& dir);

// "shard-00001-of-00003.h5", "step-00000400".
std::string shard_file_name(int index, int count);
std::string step_dir_name(int64_t step);

// Packs tensors (by byte size, in order) into shards of at most cap bytes; a tensor larger
// than the cap gets a shard of its own. Returns the shard index of each tensor; the shard
// count is max+1 (at least 1, so an empty checkpoint still has one shard file).
std::vector<int> plan_shards(const std::vector<int64_t>& nbytes, int64_t cap);

// hpctrain, LibTorch, MPI (runtime/versions.h) and HDF5 versions of this build.
nlohmann::json library_versions();

}  // namespace hpctrain::ckpt
