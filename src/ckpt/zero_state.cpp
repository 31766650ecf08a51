// ZeRO optimizer state (and ZeRO-3 snapshots' parameter blocks) <-> per-parameter state.
// Unsharding joins the ranks' blocks of each bucket (rank 0 first) and cuts out every parameter
// (join_blocks, for both); sharding fills a zero-padded bucket from the parameters and takes
// this rank's block.
#include "ckpt/zero_state.h"

#include <ATen/ATen.h>

#include <functional>
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

// Every parameter of `z`, cut from the padded buckets its ranks' blocks make up (rank 0's
// first): emit(its slot in the partition, its flat values: a view of the joined bucket).
// block(r, b): rank r's block of bucket b (`block` elements, checked by the caller).
void join_blocks(const ZeroPartition& z, const std::function<at::Tensor(int, size_t)>& block,
                 const std::function<void(const ZeroSlot&, const at::Tensor&)>& emit) {
  for (size_t b = 0; b < z.buckets.size(); ++b) {
    const ZeroBucket& bk = z.buckets[b];
    if (bk.params.empty()) continue;
    std::vector<at::Tensor> blocks;
    for (int r = 0; r < z.world_size; ++r) blocks.push_back(block(r, b));
    const at::Tensor bucket = at::cat(blocks);
    for (const ZeroSlot& p : bk.params) emit(p, bucket.narrow(0, p.offset, p.numel));
  }
}

constexpr const char* kParamPrefix = "zero3/r";
constexpr const char* kParamShapes = "param_shapes";

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
    auto block = [&, &by_rank = by_rank](int r, size_t b) {
      return by_rank.at(r).reshape({-1}).narrow(0, z.shard_offset(b), z.buckets[b].block);
    };
    join_blocks(z, block, [&, &slot = slot](const ZeroSlot& p, const at::Tensor& v) {
      const at::Tensor* m = find_tensor(st, "model/" + p.name);
      if (!m) throw disagree("parameter " + p.name + " is not in the checkpoint's model");
      if (m->numel() != p.numel)
        throw disagree("parameter " + p.name + " has " + std::to_string(m->numel()) + " elements, the record says " +
                       std::to_string(p.numel));
      out.emplace_back("optim/" + p.name + "." + slot, v.view(m->sizes()).clone());
    });
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

std::string zero_param_block_name(int rank, size_t bucket) {
  return std::string(kParamPrefix) + std::to_string(rank) + ".b" + std::to_string(bucket);
}

bool is_rank_shard_tensor(const std::string& name, int rank) {
  const std::string r = std::to_string(rank) + ".";
  return name.rfind(kPrefix + r, 0) == 0 || name.rfind(kParamPrefix + r, 0) == 0;
}

bool has_sharded_parameters(const CheckpointState& st) { return st.meta.is_object() && st.meta.contains(kParamShapes); }

void capture_parameter_blocks(CheckpointState& st, const ZeroPartition& z, int rank,
                              const std::vector<at::Tensor>& blocks) {
  std::set<std::string> sharded;
  for (const ZeroBucket& bk : z.buckets)
    for (const ZeroSlot& p : bk.params) sharded.insert("model/" + p.name);
  nlohmann::json shapes = nlohmann::json::object();
  std::vector<std::pair<std::string, at::Tensor>> kept;
  for (auto& e : st.tensors) {
    if (sharded.count(e.first))
      shapes[e.first.substr(6)] = e.second.sizes().vec();  // a view without bytes between steps: only its shape
    else
      kept.push_back(std::move(e));
  }
  if (shapes.size() != sharded.size())
    throw Error("capture_parameter_blocks: " + std::to_string(sharded.size() - shapes.size()) +
                " sharded parameter(s) not in the captured model");
  for (size_t b = 0; b < z.buckets.size(); ++b)
    if (z.buckets[b].block > 0) kept.emplace_back(zero_param_block_name(rank, b), blocks.at(b));
  st.tensors = std::move(kept);
  st.meta[kParamShapes] = std::move(shapes);
}

void unshard_parameters(CheckpointState& st, const std::string& source) {
  if (!has_sharded_parameters(st)) return;
  if (!has_sharded_optimizer_state(st)) throw Error(source + ": sharded parameters without a ZeRO partition record");
  const ZeroPartition z = ZeroPartition::from_json(st.meta["zero"], source);
  const nlohmann::json shapes = st.meta[kParamShapes];
  auto disagree = [&](const std::string& why) {
    return Error(source + ": the ZeRO-3 parameter record (" + std::to_string(z.world_size) + " ranks x " +
                 std::to_string(z.buckets.size()) + " units) disagrees with its blocks: " + why);
  };
  std::map<std::pair<int, size_t>, at::Tensor> blocks;
  std::vector<std::pair<std::string, at::Tensor>> kept;
  const std::string prefix = kParamPrefix;
  for (auto& e : st.tensors) {
    if (e.first.rfind(prefix, 0) != 0) {
      kept.push_back(std::move(e));
      continue;
    }
    const size_t dot = e.first.find(".b", prefix.size());
    const std::string r = e.first.substr(prefix.size(), dot == std::string::npos ? 0 : dot - prefix.size());
    const std::string b = dot == std::string::npos ? "" : e.first.substr(dot + 2);
    if (r.empty() || b.empty() || r.find_first_not_of("0123456789") != std::string::npos ||
        b.find_first_not_of("0123456789") != std::string::npos)
      throw disagree("unexpected tensor " + e.first);
    blocks[{std::stoi(r), std::stoul(b)}] = e.second;
  }
  size_t want = 0;
  for (size_t b = 0; b < z.buckets.size(); ++b) {
    if (z.buckets[b].block == 0) continue;
    for (int r = 0; r < z.world_size; ++r) {
      auto it = blocks.find({r, b});
      if (it == blocks.end()) throw disagree("no " + zero_param_block_name(r, b));
      if (it->second.numel() != z.buckets[b].block)
        throw disagree(zero_param_block_name(r, b) + " has " + std::to_string(it->second.numel()) + " elements, not " +
                       std::to_string(z.buckets[b].block));
      ++want;
    }
  }
  if (blocks.size() != want) throw disagree(std::to_string(blocks.size() - want) + " block(s) beyond the record");
  join_blocks(
      z, [&](int r, size_t b) { return blocks.at({r, b}).reshape({-1}); },
      [&](const ZeroSlot& p, const at::Tensor& v) {
        if (!shapes.contains(p.name)) throw disagree("no shape for parameter " + p.name);
        const std::vector<int64_t> shape = shapes.at(p.name).get<std::vector<int64_t>>();
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        if (n != p.numel)
          throw disagree("parameter " + p.name + " has " + std::to_string(n) + " elements, the record says " +
                         std::to_string(p.numel));
        kept.emplace_back("model/" + p.name, v.view(shape).clone());
      });
  st.tensors = std::move(kept);
  st.meta.erase(kParamShapes);
}

}  // namespace hpctrain
