// Test helper: reads a TFRecord file of Events back, checking both CRCs of every record.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "metrics/crc32c.h"
#include "metrics/tensorboard_event.pb.h"

namespace hpctrain::testing {

inline uint64_t little_endian(const std::string& b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b.at(at + i));
  return v;
}

// Every record must be whole and carry valid CRCs (ADD_FAILURE otherwise).
inline std::vector<tb::Event> read_events(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<tb::Event> out;
  size_t at = 0;
  while (at < b.size()) {
    if (b.size() - at < 12) {
      ADD_FAILURE() << path << ": truncated header at " << at;
      break;
    }
    uint64_t len = little_endian(b, at, 8);
    EXPECT_EQ(little_endian(b, at + 8, 4), masked_crc32c(b.substr(at, 8))) << "length CRC at " << at;
    if (b.size() - at - 12 < len + 4) {
      ADD_FAILURE() << path << ": truncated record at " << at;
      break;
    }
    std::string data = b.substr(at + 12, len);
    EXPECT_EQ(little_endian(b, at + 12 + len, 4), masked_crc32c(data)) << "data CRC at " << at;
    tb::Event e;
    EXPECT_TRUE(e.ParseFromString(data)) << "record at " << at;
    out.push_back(e);
    at += 12 + len + 4;
  }
  return out;
}

}  // namespace hpctrain::testing
