// ZeRO-1 optimizer state <-> per-parameter state. Unsharding joins the ranks' blocks of each
// bucket (rank 0 first) and cuts out every parameter; sharding fills a zero-padded bucket from
// the parameters and takes this rank's block.
#include "ckpt/zero_state.h"

#include <ATen/ATen.h>

#include <set>

#include "runtime/check.h"

namespace hpctrain {
namespace {

constexpr const char* kPrefix = "optim/zero/r";

// The slots of rank shards present in `st`: slot -> rank -> tensor.
std::map<std::string, std::map<int, at::Tensor>> rank_shards(const CheckpointState& st, const std::string& source) {
  std::map<std::string, std::map<int, at::Tensor>> out;
  const std::string prefix = kPrefix;
  for (const auto& [name, t] : st.tensors) {
    if (name.rfind(prefix, 0) != 0) continue;
    size_t dot = name.find('.', prefix.size());
    std::string digits = name.substr(prefix.size(), dot == std::string::npos ? dot : dot - prefix.size());
    if (dot == std::string::npos || digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
      throw Error(source + ": unexpected sharded optimizer tensor " + name);
    out[name.substr(dot + 1)][std::stoi(digits)] = t;
  }
  return out;
}

const at::Tensor* find_tensor(const CheckpointState& st, const std::string& name) {
  for (const auto& [n, t] : st.tensors)
    if (n == name) return &t;
  return nullptr;
}

}  // namespace

std::string zero_shard_name(int rank, const std::string& slot) {
  return std::string(kPrefix) + std::to_string(rank) + "." + slot;
}

bool has_sharded_optimizer_state(const CheckpointState& st) { return st.meta.is_object() && st.meta.contains("zero"); }

void unshard_optimizer_state(CheckpointState& st, const std::string& source) {
  if (!has_sharded_optimizer_state(st)) return;
  ZeroPartition z = ZeroPartition::from_json(st.meta["zero"], source);
  const int64_t shard = z.shard_numel();
  auto shards = rank_shards(st, source);
  auto disagree = [&](const std::string& why) {
    return Error(source + ": the ZeRO partition record (" + std::to_string(z.world_size) + " ranks x " +
                 std::to_string(shard) + " elements) disagrees with its shards: " + why);
  };
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& [slot, by_rank] : shards) {
    if (static_cast<int>(by_rank.size()) != z.world_size || by_rank.rbegin()->first != z.world_size - 1)
      throw disagree("slot " + slot + " has " + std::to_string(by_rank.size()) + " rank shard(s)");
    for (const auto& [r, t] : by_rank)
      if (t.numel() != shard)
        throw disagree(zero_shard_name(r, slot) + " has " + std::to_string(t.numel()) + " elements");
    for (size_t b = 0; b < z.buckets.size(); ++b) {
      const ZeroBucket& bk = z.buckets[b];
      std::vector<at::Tensor> blocks;
      for (const auto& [r, t] : by_rank) blocks.push_back(t.reshape({-1}).narrow(0, z.shard_offset(b), bk.block));
      at::Tensor bucket = at::cat(blocks);  // the padded bucket, rank 0's block first
      for (const ZeroSlot& p : bk.params) {
        const at::Tensor* m = find_tensor(st, "model/" + p.name);
        if (!m) throw disagree("parameter " + p.name + " is not in the checkpoint's model");
        if (m->numel() != p.numel)
          throw disagree("parameter " + p.name + " has " + std::to_string(m->numel()) + " elements, the record says " +
                         std::to_string(p.numel));
        out.emplace_back("optim/" + p.name + "." + slot, bucket.narrow(0, p.offset, p.numel).view(m->sizes()).clone());
      }
    }
  }
  if (const at::Tensor* step = find_tensor(st, kZeroStepTensor))
    for (const auto& bk : z.buckets)
      for (const auto& p : bk.params) out.emplace_back("optim/" + p.name + ".step", step->clone());
  std::vector<std::pair<std::string, at::Tensor>> kept;
  for (auto& e : st.tensors)
    if (e.first.rfind("optim/zero/", 0) != 0) kept.push_back(std::move(e));
  for (auto& e : out) kept.push_back(std::move(e));
  st.tensors = std::move(kept);
  st.meta["zero_saved_world_size"] = z.world_size;
  st.meta.erase("zero");
}

std::map<std::string, at::Tensor> shard_optimizer_state(const CheckpointState& st, const ZeroPartition& z, int rank,
                                                        const std::string& source) {
  std::map<std::string, std::map<std::string, at::Tensor>> by_slot;  // slot -> param -> tensor
  std::set<std::string> names;
  for (const auto& bk : z.buckets)
    for (const auto& p : bk.params) names.insert(p.name);
  for (const auto& [name, t] : st.tensors) {
    if (name.rfind("optim/", 0) != 0 || name.rfind("optim/zero/", 0) == 0) continue;
    size_t dot = name.rfind('.');
    if (dot == std::string::npos) continue;
    std::string param = name.substr(6, dot - 6), slot = name.substr(dot + 1);
    if (slot == "step" || !names.count(param)) continue;
    by_slot[slot][param] = t;
  }
  std::map<std::string, at::Tensor> out;
  for (const auto& [slot, params] : by_slot) {
    if (params.size() != names.size())
      throw Error(source + ": optimizer slot " + slot + " is saved for " + std::to_string(params.size()) + " of " +
                  std::to_string(names.size()) + " parameters");
    std::vector<at::Tensor> blocks;
    for (const auto& bk : z.buckets) {
      at::Tensor first = params.begin()->second;
      at::Tensor bucket = at::zeros({bk.padded}, first.options());
      for (const auto& p : bk.params) {
        const at::Tensor& t = params.at(p.name);
        if (t.numel() != p.numel)
          throw Error(source + ": optim/" + p.name + "." + slot + " has " + std::to_string(t.numel()) +
                      " elements, the parameter " + std::to_string(p.numel));
        bucket.narrow(0, p.offset, p.numel).copy_(t.reshape({-1}));
      }
      blocks.push_back(bucket.narrow(0, rank * bk.block, bk.block));
    }
    out[slot] = at::cat(blocks);
  }
  return out;
}

}  // namespace hpctrain
