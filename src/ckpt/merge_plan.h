// What `ckpt merge` writes, planned from the manifest alone, and where each tensor's values
// come from (internal to src/ckpt; merge.cpp streams the plan into a merged-file writer).
//
// Contract:
// - plan_merge lists the merged file's tensors in the order the in-memory merge wrote them:
//   the selected checkpoint tensors in verify_checkpoint's visiting order (model/ only, or
//   everything with `full`; under `full` a ZeRO checkpoint's optim/zero/ shards are replaced),
//   each tied alias (meta "tied") right after the last model tensor, then under `full` the
//   unsharded optimizer state, per slot (by name), bucket and parameter, as
//   unshard_optimizer_state (ckpt/zero_state.h) orders it, and optim/<param>.step.
// - Names, dtypes (after the --dtype cast) and shapes come from the manifest; so does the xxh3
//   of every tensor that is written as stored (no cast, not unsharded): the others' are ""
//   until the caller fills them in.
// - It checks what the in-memory merge checked, with the same messages (a tied name of a tensor
//   the checkpoint lacks; a ZeRO partition record that disagrees with its shards).
// - MergeSource reads a planned tensor from the step directory's shard files, cast: a whole
//   dataset (a tied alias read again, or any tensor for the checksum pass) or, for unsharded
//   optimizer state, only the slices of each rank's flat shard that hold that parameter
//   (HDF5 partial reads): at most one parameter's state in memory at a time.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "ckpt/manifest.h"
#include "ckpt/merge.h"
#include "ckpt/tensor_spec.h"
#include "ddp/zero_partition.h"
#include "io/h5_util.h"

namespace hpctrain::ckpt {

struct MergeItem {
  enum class From {
    kVisit,     // handed over by verify_checkpoint: checkpoint tensor `source`
    kReread,    // read again from its shard: checkpoint tensor `source` (a tied alias)
    kZeroSlot,  // optimizer slot `slot` of parameter `param` (partition bucket/param index)
    kZeroStep,  // optim/zero/step, once per parameter
  };
  TensorSpec out;  // the name written (with "model/" in .h5 files, without elsewhere), dtype, shape
  From from = From::kVisit;
  std::string source;
  std::string slot;
  size_t bucket = 0, param = 0;
  std::string xxh3;  // as written; "" when it must be computed
};

struct MergePlan {
  std::vector<MergeItem> items;
  nlohmann::json meta;              // the manifest's meta as the merged file records it
  std::vector<std::string> kept;    // with --dtype: tensors left as they are ("name (int64)")
  bool cast = false;                // --dtype given
  at::ScalarType cast_to = at::kFloat;
  bool unshard = false;             // --full of a ZeRO checkpoint
  ZeroPartition zero;               // its partition, when unshard
};

// `prefixed`: names keep "model/" (the .h5 format). `source` names the checkpoint in errors.
MergePlan plan_merge(const Manifest& m, const MergeOptions& opts, bool prefixed, const std::string& source);

class MergeSource {
 public:
  MergeSource(std::string step_dir, const Manifest& m, const MergePlan& plan);
  // The tensor of `item` (any From), cast as planned, contiguous.
  at::Tensor read(const MergeItem& item);
  // `t` cast as planned (floating tensors only).
  at::Tensor cast(at::Tensor t) const;

 private:
  const TensorEntry& entry(const std::string& name) const;
  hid_t shard_file(int shard);
  at::Tensor zero_slot(const MergeItem& item);

  std::string dir_;
  const Manifest& m_;
  const MergePlan& plan_;
  std::map<int, h5::Handle> files_;
};

}  // namespace hpctrain::ckpt
