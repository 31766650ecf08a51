// BucketPlan: which gradient goes into which flat bucket, at which offset.
//
// Contract:
// - Parameters are taken in REVERSE registration order (backward produces the last layers'
//   gradients first, so the first bucket fills first and communication starts early).
// - A bucket holds parameters of one dtype and one device only.
// - The first bucket is capped at `first_cap_bytes` (<= 1 MiB by default), later ones at
//   `cap_bytes`. A parameter larger than the cap gets a bucket of its own.
// - The plan is a pure function of the parameter list and caps: every rank with the same
//   parameters gets the same plan, hence the same collective sequence.
// No LibTorch here: it is a small, separately testable unit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain {

struct ParamSpec {
  std::string name;
  int64_t numel = 0;
  int64_t element_size = 4;
  std::string dtype = "float32";
  std::string device = "cpu";
};

struct Bucket {
  std::vector<size_t> params;    // indices into the ParamSpec list, in slot order
  std::vector<int64_t> offsets;  // element offset of each param's slot in the flat buffer
  int64_t numel = 0;
  int64_t bytes = 0;
  std::string dtype, device;
};

struct BucketPlan {
  std::vector<Bucket> buckets;
  // For parameter i: its bucket and its slot index within that bucket.
  std::vector<size_t> bucket_of, slot_of;
  // "3 buckets: [0] 2 params 1.0 MiB float32 cpu, ..."
  std::string describe() const;
};

BucketPlan make_bucket_plan(const std::vector<ParamSpec>& params, int64_t cap_bytes,
                            int64_t first_cap_bytes = int64_t(1) << 20);

}  // namespace hpctrain
