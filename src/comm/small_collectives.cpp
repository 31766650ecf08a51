// allgather_strings sends each rank's bytes as a uint8 tensor through Communicator::allgather
// (lengths may differ); sum_over_ranks is a one-element int64 allreduce.
#include "comm/small_collectives.h"

#include <ATen/ATen.h>

#include <cstring>

#include "comm/blocking.h"
#include "comm/communicator.h"

namespace hpctrain {

std::vector<std::string> allgather_strings(Communicator& comm, const std::string& mine, const std::string& tag) {
  at::Tensor bytes = at::empty({static_cast<int64_t>(mine.size())}, at::kByte);
  if (!mine.empty()) std::memcpy(bytes.data_ptr(), mine.data(), mine.size());
  std::vector<at::Tensor> parts;
  allgather_now(comm, bytes, &parts, tag);
  std::vector<std::string> out;
  out.reserve(parts.size());
  for (const auto& p : parts)
    out.emplace_back(p.numel() > 0 ? static_cast<const char*>(p.data_ptr()) : "", static_cast<size_t>(p.numel()));
  return out;
}

int64_t sum_over_ranks(Communicator& comm, int64_t mine, const std::string& tag) {
  at::Tensor t = at::full({1}, mine, at::kLong);
  allreduce_now(comm, t, ReduceOp::kSum, tag);
  return t.item<int64_t>();
}

}  // namespace hpctrain
