// make_bucket_plan walks the parameters last to first and starts a new bucket on a dtype or
// device change, or when the next parameter would pass the cap (first_cap_bytes for bucket 0).
#include "ddp/bucket_plan.h"

#include <algorithm>
#include <cstdio>

namespace hpctrain {

BucketPlan make_bucket_plan(const std::vector<ParamSpec>& params, int64_t cap_bytes, int64_t first_cap_bytes) {
  BucketPlan plan;
  plan.bucket_of.assign(params.size(), 0);
  plan.slot_of.assign(params.size(), 0);
  cap_bytes = std::max<int64_t>(cap_bytes, 1);
  first_cap_bytes = std::max<int64_t>(std::min(first_cap_bytes, cap_bytes), 1);
  for (size_t k = params.size(); k-- > 0;) {
    const ParamSpec& p = params[k];
    int64_t bytes = p.numel * p.element_size;
    bool need_new = plan.buckets.empty();
    if (!need_new) {
      const Bucket& b = plan.buckets.back();
      int64_t cap = plan.buckets.size() == 1 ? first_cap_bytes : cap_bytes;
      need_new = b.dtype != p.dtype || b.device != p.device || b.bytes + bytes > cap;
    }
    if (need_new) {
      plan.buckets.emplace_back();
      plan.buckets.back().dtype = p.dtype;
      plan.buckets.back().device = p.device;
    }
    Bucket& b = plan.buckets.back();
    plan.bucket_of[k] = plan.buckets.size() - 1;
    plan.slot_of[k] = b.params.size();
    b.params.push_back(k);
    b.offsets.push_back(b.numel);
    b.numel += p.numel;
    b.bytes += bytes;
  }
  return plan;
}

std::string BucketPlan::describe() const {
  std::string s = std::to_string(buckets.size()) + " bucket(s):";
  for (size_t i = 0; i < buckets.size(); ++i) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), " [%zu] %zu param(s) %.3f MiB %s %s%s", i, buckets[i].params.size(),
                  buckets[i].bytes / 1048576.0, buckets[i].dtype.c_str(), buckets[i].device.c_str(),
                  i + 1 < buckets.size() ? "," : "");
    s += buf;
  }
  return s;
}

}  // namespace hpctrain
