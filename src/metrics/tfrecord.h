// TFRecord framing, the container of TensorBoard event files.
//
// Contract: one record is
//   uint64 length (little-endian) | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)
// tfrecord_frame() returns those bytes for `data`; a file is such records back to back.
#pragma once

#include <string>
#include <string_view>

namespace hpctrain {

std::string tfrecord_frame(std::string_view data);

}  // namespace hpctrain
