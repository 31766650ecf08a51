// ZeroPartition: pads each DDP bucket to the next multiple of the world size and splits it into
// equal blocks; from_json checks that a checkpoint's record adds up before it is used.
#include "ddp/zero_partition.h"

#include "runtime/check.h"

namespace hpctrain {

int64_t ZeroPartition::shard_numel() const {
  int64_t n = 0;
  for (const auto& b : buckets) n += b.block;
  return n;
}

int64_t ZeroPartition::shard_offset(size_t bucket) const {
  int64_t n = 0;
  for (size_t i = 0; i < bucket && i < buckets.size(); ++i) n += buckets[i].block;
  return n;
}

int64_t ZeroPartition::padding() const {
  int64_t n = 0;
  for (const auto& b : buckets) n += b.padded - b.numel;
  return n;
}

int64_t ZeroPartition::param_numel() const {
  int64_t n = 0;
  for (const auto& b : buckets) n += b.numel;
  return n;
}

nlohmann::json ZeroPartition::to_json() const {
  nlohmann::json bs = nlohmann::json::array();
  for (const auto& b : buckets) {
    nlohmann::json ps = nlohmann::json::array();
    for (const auto& p : b.params) ps.push_back({p.name, p.offset, p.numel});
    bs.push_back({{"dtype", b.dtype}, {"numel", b.numel}, {"padded", b.padded}, {"block", b.block}, {"params", ps}});
  }
  return {{"world_size", world_size}, {"shard_numel", shard_numel()}, {"padding", padding()}, {"buckets", bs}};
}

ZeroPartition ZeroPartition::from_json(const nlohmann::json& j, const std::string& source) {
  auto bad = [&](const std::string& why) { return Error(source + ": the ZeRO partition record is invalid: " + why); };
  ZeroPartition z;
  try {
    z.world_size = j.at("world_size").get<int>();
    if (z.world_size < 1) throw bad("world_size " + std::to_string(z.world_size));
    for (const auto& jb : j.at("buckets")) {
      ZeroBucket b;
      b.dtype = jb.at("dtype").get<std::string>();
      b.numel = jb.at("numel").get<int64_t>();
      b.padded = jb.at("padded").get<int64_t>();
      b.block = jb.at("block").get<int64_t>();
      int64_t sum = 0;
      for (const auto& jp : jb.at("params")) {
        ZeroSlot s{jp.at(0).get<std::string>(), jp.at(1).get<int64_t>(), jp.at(2).get<int64_t>()};
        if (s.offset != sum || s.numel < 0)
          throw bad("parameter " + s.name + " does not follow its bucket's previous one");
        sum += s.numel;
        b.params.push_back(std::move(s));
      }
      int64_t want = (b.numel + z.world_size - 1) / z.world_size * z.world_size;
      if (sum != b.numel || b.padded != want || b.block * z.world_size != b.padded)
        throw bad("bucket " + std::to_string(z.buckets.size()) + " sizes (" + std::to_string(b.numel) +
                  " elements, padded " + std::to_string(b.padded) + ", block " + std::to_string(b.block) +
                  ") do not add up over " + std::to_string(z.world_size) + " ranks");
      z.buckets.push_back(std::move(b));
    }
  } catch (const nlohmann::json::exception& e) {
    throw bad(e.what());
  }
  return z;
}

ZeroPartition make_zero_partition(const BucketPlan& plan, const std::vector<ParamSpec>& params, int world) {
  if (world < 1) throw Error("ZeRO partition: world size " + std::to_string(world));
  ZeroPartition z;
  z.world_size = world;
  for (const Bucket& bk : plan.buckets) {
    ZeroBucket b;
    b.dtype = bk.dtype;
    b.numel = bk.numel;
    b.padded = (bk.numel + world - 1) / world * world;
    b.block = b.padded / world;
    for (size_t s = 0; s < bk.params.size(); ++s)
      b.params.push_back({params[bk.params[s]].name, bk.offsets[s], params[bk.params[s]].numel});
    z.buckets.push_back(std::move(b));
  }
  return z;
}

}  // namespace hpctrain
