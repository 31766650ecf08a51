// XXH3-64 checksums of tensors, and their 16-hex-digit spelling in manifests.
#include "ckpt/checksum.h"

#include <ATen/ATen.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>

namespace hpctrain::ckpt {

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool is_hex64(const std::string& s) {
  return s.size() == 16 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string checksum(const at::Tensor& t) {
  TORCH_CHECK(t.device().is_cpu() && t.is_contiguous(), "checksum needs a contiguous CPU tensor");
  return hex64(XXH3_64bits(t.numel() ? t.data_ptr() : nullptr, t.nbytes()));
}

}  // namespace hpctrain::ckpt
