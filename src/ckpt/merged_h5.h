// A whole checkpoint in one HDF5 file (`ckpt merge --out x.h5`; internal to src/ckpt, behind
// ckpt/merged_file.h). Datasets keep the checkpoint's names ("model/fc.weight",
// "optim/...") and the root attribute "hpctrain_meta" holds the metadata as JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "ckpt/checkpoint.h"
#include "runtime/named_tensors.h"

namespace hpctrain::ckpt {

void write_merged_h5(const std::string& path, const nlohmann::json& meta, const NamedTensors& tensors);
// Every dataset (names as stored), and the meta from "hpctrain_meta" (empty object if absent).
CheckpointState read_merged_h5(const std::string& path);

}  // namespace hpctrain::ckpt
