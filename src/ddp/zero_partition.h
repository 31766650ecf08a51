// ZeroPartition: how ZeRO-1 splits the flat parameter space over ranks (no LibTorch here).
//
// Contract:
// - The buckets are DDP's (bucket_plan.h), in plan order. Bucket b holds `numel` elements and is
//   padded with zeros to `padded`, the next multiple of the world size, so that every rank owns
//   an equal block of `block` = padded / world elements: rank r owns elements
//   [r * block, (r + 1) * block) of the padded bucket. Any parameter count works.
// - A rank's shard is the concatenation of its blocks in bucket order: shard_numel() elements,
//   the same on every rank. The flat parameter space is rank-major (rank 0's shard, then rank
//   1's, ...), so each rank's shard is one contiguous range of it:
//   [rank * shard_numel(), (rank + 1) * shard_numel()). Block b of a shard starts at
//   shard_offset(b).
// - Gradients are reduce-scattered and parameters allgathered bucket by bucket on these blocks
//   (MPI_Reduce_scatter_block / MPI_Allgather, ncclReduceScatter / ncclAllGather).
// - to_json() is the record a checkpoint keeps ("world_size", per bucket "dtype", "numel",
//   "padded", "block" and its parameters as [name, offset in bucket, numel]); from_json
//   validates it (sizes add up, padding is the least multiple) and names `source` on error.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ddp/bucket_plan.h"

namespace hpctrain {

struct ZeroSlot {
  std::string name;    // the parameter's state_dict name
  int64_t offset = 0;  // element offset in its bucket
  int64_t numel = 0;
};

struct ZeroBucket {
  std::string dtype;
  int64_t numel = 0, padded = 0, block = 0;
  std::vector<ZeroSlot> params;  // in slot order
};

struct ZeroPartition {
  int world_size = 1;
  std::vector<ZeroBucket> buckets;

  int64_t shard_numel() const;
  int64_t shard_offset(size_t bucket) const;
  int64_t padding() const;      // zeros added over all buckets
  int64_t param_numel() const;  // real elements over all buckets
  nlohmann::json to_json() const;
  static ZeroPartition from_json(const nlohmann::json& j, const std::string& source);
};

// The partition of `plan` (built from `params`) over `world` ranks.
ZeroPartition make_zero_partition(const BucketPlan& plan, const std::vector<ParamSpec>& params, int world);

}  // namespace hpctrain
