// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord framing uses it.
//
// Contract: crc32c("123456789") == 0xE3069283 (the standard check value). `crc` continues a
// running checksum (pass the previous result; 0 to start). masked_crc32c is TFRecord's mask,
// ((crc >> 15) | (crc << 17)) + 0xA282EAD8, which keeps a CRC of CRC-bearing data from being
// trivially zero. Table-driven, one byte per step: metrics records are small.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace hpctrain {

uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
inline uint32_t crc32c(std::string_view s, uint32_t crc = 0) { return crc32c(s.data(), s.size(), crc); }
uint32_t mask_crc32c(uint32_t crc);
inline uint32_t masked_crc32c(std::string_view s) { return mask_crc32c(crc32c(s)); }

}  // namespace hpctrain
