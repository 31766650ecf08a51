// plan_merge: the merged file's tensors from the manifest; MergeSource: their values from the
// shard files, ZeRO optimizer state by partial reads of each rank's flat shard.
#include "ckpt/merge_plan.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <unordered_map>

#include "ckpt/checksum.h"
#include "ckpt/zero_state.h"
#include "io/h5_tensor.h"
#include "runtime/check.h"
#include "runtime/host_tensor.h"
#include "runtime/tensor_text.h"

namespace hpctrain::ckpt {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The manifest's tensors in verify_checkpoint's order: shard by shard, manifest order within.
std::vector<const TensorEntry*> visit_order(const Manifest& m) {
  std::vector<const TensorEntry*> out;
  for (size_t s = 0; s < m.shards.size(); ++s)
    for (const auto& e : m.tensors)
      if (e.shard == static_cast<int>(s)) out.push_back(&e);
  return out;
}

// ZeRO rank shards by slot, then rank (as unshard_optimizer_state groups them), checked against
// the partition record; appends the unsharded tensors to plan.items.
void plan_unshard(const Manifest& m, MergePlan& plan, const std::string& source) {
  const ZeroPartition& z = plan.zero;
  const int64_t shard = z.shard_numel();
  auto disagree = [&](const std::string& why) {
    return Error(source + ": the ZeRO partition record (" + std::to_string(z.world_size) + " ranks x " +
                 std::to_string(shard) + " elements) disagrees with its shards: " + why);
  };
  const std::string prefix = "optim/zero/r";
  std::map<std::string, std::map<int, const TensorEntry*>> shards;
  std::unordered_map<std::string, const TensorEntry*> by_name;
  for (const auto& e : m.tensors) by_name[e.name] = &e;
  for (const auto& e : m.tensors) {
    if (!starts_with(e.name, prefix.c_str())) continue;
    size_t dot = e.name.find('.', prefix.size());
    std::string digits = e.name.substr(prefix.size(), dot == std::string::npos ? dot : dot - prefix.size());
    if (dot == std::string::npos || digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
      throw Error(source + ": unexpected sharded optimizer tensor " + e.name);
    shards[e.name.substr(dot + 1)][std::stoi(digits)] = &e;
  }
  auto cast_of = [&](const std::string& dtype) {
    at::ScalarType t = h5::dtype_from_name(dtype);
    return plan.cast && at::isFloatingType(t) ? plan.cast_to : t;
  };
  for (const auto& [slot, by_rank] : shards) {
    if (static_cast<int>(by_rank.size()) != z.world_size || by_rank.rbegin()->first != z.world_size - 1)
      throw disagree("slot " + slot + " has " + std::to_string(by_rank.size()) + " rank shard(s)");
    for (const auto& [r, e] : by_rank)
      if (c10::multiply_integers(e->shape) != shard)
        throw disagree(zero_shard_name(r, slot) + " has " + std::to_string(c10::multiply_integers(e->shape)) +
                       " elements");
    for (size_t b = 0; b < z.buckets.size(); ++b)
      for (size_t i = 0; i < z.buckets[b].params.size(); ++i) {
        const ZeroSlot& p = z.buckets[b].params[i];
        auto it = by_name.find("model/" + p.name);
        if (it == by_name.end()) throw disagree("parameter " + p.name + " is not in the checkpoint's model");
        int64_t numel = c10::multiply_integers(it->second->shape);
        if (numel != p.numel)
          throw disagree("parameter " + p.name + " has " + std::to_string(numel) + " elements, the record says " +
                         std::to_string(p.numel));
        MergeItem item;
        item.out = {"optim/" + p.name + "." + slot, cast_of(by_rank.begin()->second->dtype), it->second->shape};
        item.from = MergeItem::From::kZeroSlot;
        item.source = p.name;
        item.slot = slot;
        item.bucket = b;
        item.param = i;
        plan.items.push_back(std::move(item));
      }
  }
  auto step = by_name.find(kZeroStepTensor);
  if (step != by_name.end())
    for (const auto& bk : z.buckets)
      for (const auto& p : bk.params) {
        MergeItem item;
        item.out = {"optim/" + p.name + ".step", cast_of(step->second->dtype), step->second->shape};
        item.from = MergeItem::From::kZeroStep;
        item.source = kZeroStepTensor;
        plan.items.push_back(std::move(item));
      }
}

// Each tied alias (meta "tied": {alias: name}) right after the last model tensor, read again.
void plan_tied(MergePlan& plan, bool prefixed) {
  const nlohmann::json& meta = plan.meta["meta"];
  if (!meta.contains("tied") || !meta["tied"].is_object()) return;
  const std::string prefix = prefixed ? "model/" : "";
  auto& items = plan.items;
  size_t end = 0;
  for (size_t i = 0; i < items.size(); ++i)
    if (prefix.empty() || starts_with(items[i].out.name, prefix.c_str())) end = i + 1;
  std::vector<MergeItem> extra;
  for (const auto& [alias, name] : meta["tied"].items()) {
    auto it = std::find_if(items.begin(), items.end(),
                           [&](const MergeItem& x) { return x.out.name == prefix + name.get<std::string>(); });
    if (it == items.end())
      throw Error("checkpoint metadata names " + alias + " a tied name of " + name.get<std::string>() +
                  ", which the checkpoint does not hold");
    MergeItem a = *it;
    a.out.name = prefix + alias;
    a.from = MergeItem::From::kReread;
    extra.push_back(std::move(a));
  }
  items.insert(items.begin() + static_cast<std::ptrdiff_t>(end), extra.begin(), extra.end());
}

}  // namespace

MergePlan plan_merge(const Manifest& m, const MergeOptions& opts, bool prefixed, const std::string& source) {
  MergePlan plan;
  plan.cast = !opts.dtype.empty();
  plan.cast_to = opts.dtype == "fp16" ? at::kHalf : at::kBFloat16;
  plan.unshard = opts.full && m.meta.is_object() && m.meta.contains("zero");
  Manifest stored = m;
  if (plan.unshard) {
    plan.zero = ZeroPartition::from_json(m.meta["zero"], source);
    stored.meta["zero_saved_world_size"] = plan.zero.world_size;
    stored.meta.erase("zero");
  }
  plan.meta = stored.to_json();
  plan.meta.erase("tensors");
  plan.meta.erase("shards");
  for (const TensorEntry* e : visit_order(m)) {
    bool model = starts_with(e->name, "model/");
    if (!model && !opts.full) continue;
    at::ScalarType dtype = h5::dtype_from_name(e->dtype);
    bool floating = at::isFloatingType(dtype);
    if (plan.cast && !floating) plan.kept.push_back(e->name + " (" + e->dtype + ")");
    if (plan.unshard && starts_with(e->name, "optim/zero/")) continue;
    MergeItem item;
    item.out = {prefixed ? e->name : e->name.substr(6), plan.cast && floating ? plan.cast_to : dtype, e->shape};
    item.source = e->name;
    if (!plan.cast || !floating) item.xxh3 = e->xxh3;
    plan.items.push_back(std::move(item));
  }
  if (plan.unshard) plan_unshard(m, plan, source);
  plan_tied(plan, prefixed);
  return plan;
}

MergeSource::MergeSource(std::string step_dir, const Manifest& m, const MergePlan& plan)
    : dir_(std::move(step_dir)), m_(m), plan_(plan) {}

at::Tensor MergeSource::cast(at::Tensor t) const {
  if (plan_.cast && at::isFloatingType(t.scalar_type())) {
    at::Tensor c = empty_unpooled(t.sizes(), plan_.cast_to);  // freed pages go back at once
    c.copy_(t);
    return c;
  }
  return t.contiguous();
}

const TensorEntry& MergeSource::entry(const std::string& name) const {
  for (const auto& e : m_.tensors)
    if (e.name == name) return e;
  throw Error("checkpoint " + dir_ + ": tensor " + printable(name) + " is not in its manifest");
}

hid_t MergeSource::shard_file(int shard) {
  auto it = files_.find(shard);
  if (it == files_.end()) {
    if (shard < 0 || static_cast<size_t>(shard) >= m_.shards.size())
      throw Error("checkpoint " + dir_ + ": shard " + std::to_string(shard) + " is not in its manifest");
    it = files_.emplace(shard, h5::open_h5(dir_ + "/" + m_.shards[shard].file)).first;
  }
  return it->second.get();
}

at::Tensor MergeSource::zero_slot(const MergeItem& item) {
  const ZeroPartition& z = plan_.zero;
  const ZeroBucket& bk = z.buckets.at(item.bucket);
  const ZeroSlot& p = bk.params.at(item.param);
  std::vector<at::Tensor> parts;
  for (int64_t r = p.offset / bk.block; p.numel > 0 && r <= (p.offset + p.numel - 1) / bk.block; ++r) {
    int64_t lo = std::max(p.offset, r * bk.block) - r * bk.block;
    int64_t hi = std::min(p.offset + p.numel, (r + 1) * bk.block) - r * bk.block;
    const TensorEntry& e = entry(zero_shard_name(static_cast<int>(r), item.slot));
    parts.push_back(h5::read_tensor_range(shard_file(e.shard), e.name, z.shard_offset(item.bucket) + lo, hi - lo));
  }
  if (parts.empty()) return at::empty(item.out.shape, at::TensorOptions(item.out.dtype));
  at::Tensor t = parts[0];
  if (parts.size() > 1) {
    t = empty_unpooled({p.numel}, parts[0].scalar_type());
    at::cat_out(t, parts);
  }
  return cast(t.view(item.out.shape));
}

at::Tensor MergeSource::read(const MergeItem& item) {
  if (item.from == MergeItem::From::kZeroSlot) return zero_slot(item);
  const TensorEntry& e = entry(item.source);
  std::string file = dir_ + "/" + m_.shards.at(static_cast<size_t>(e.shard)).file;
  at::Tensor t;
  try {
    t = h5::read_tensor(shard_file(e.shard), e.name);
  } catch (const Error& err) {
    throw Error(printable(file) + ": tensor " + printable(e.name) + ": " + err.what());
  }
  std::string sum = checksum(t);
  if (sum != e.xxh3)
    throw Error(printable(file) + ": tensor " + printable(e.name) + ": checksum mismatch (data " + sum + ", manifest " +
                printable(e.xxh3) + ")");
  return cast(std::move(t));
}

}  // namespace hpctrain::ckpt
