// Checksums of checkpoint tensors and shard files (xxHash XXH3-64, as 16 hex digits).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace hpctrain::ckpt {

// 64-bit XXH3 of a contiguous CPU tensor's bytes, as 16 lowercase hex digits.
std::string checksum(const at::Tensor& t);
// 16 lowercase hex digits of a 64-bit value; is_hex64 checks that form.
std::string hex64(uint64_t v);
bool is_hex64(const std::string& s);

}  // namespace hpctrain::ckpt
