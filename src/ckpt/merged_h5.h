// A whole checkpoint in one HDF5 file (`ckpt merge --out x.h5`; internal to src/ckpt, behind
// ckpt/merged_file.h). Datasets keep the checkpoint's names ("model/fc.weight",
// "optim/...") and the root attribute "hpctrain_meta" holds the metadata as JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/merged_writer.h"
#include "runtime/named_tensors.h"

namespace hpctrain::ckpt {

// Streams `specs` (names as stored: "model/fc.weight") into `path` (ckpt/merged_writer.h): the
// HDF5 structure and the "hpctrain_meta" attribute first, each tensor's bytes at its place as
// add() hands it over; the same bytes as the shard writer gives for those tensors.
std::unique_ptr<MergedFileWriter> open_merged_h5(const std::string& path, const nlohmann::json& meta,
                                                 std::vector<TensorSpec> specs);
// Every dataset (names as stored), and the meta from "hpctrain_meta" (empty object if absent).
CheckpointState read_merged_h5(const std::string& path);

}  // namespace hpctrain::ckpt
