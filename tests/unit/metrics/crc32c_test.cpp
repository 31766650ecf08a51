#include "metrics/crc32c.h"

#include <gtest/gtest.h>

#include <string>

#include "metrics/tfrecord.h"

namespace hpctrain {
namespace {

TEST(Crc32c, StandardCheckValue) { EXPECT_EQ(crc32c("123456789"), 0xE3069283u); }

TEST(Crc32c, KnownVectors) {
  // RFC 3720 (iSCSI) appendix B.4 test patterns.
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string inc;
  for (int i = 0; i < 32; ++i) inc.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(inc), 0x46DD794Eu);
  EXPECT_EQ(crc32c(""), 0u);
}

TEST(Crc32c, ContinuesARunningChecksum) {
  std::string s = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(crc32c(s.substr(10), crc32c(s.substr(0, 10))), crc32c(s));
}

TEST(Crc32c, MaskIsTfRecordsRotatePlusConstant) {
  uint32_t c = 0xE3069283u;
  EXPECT_EQ(mask_crc32c(c), ((c >> 15) | (c << 17)) + 0xA282EAD8u);
  EXPECT_EQ(mask_crc32c(0), 0xA282EAD8u);
}

uint64_t little_endian(const std::string& b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b.at(at + i));
  return v;
}

TEST(TfRecord, FramesLengthCrcDataCrc) {
  std::string data = "hello, tensorboard";
  std::string rec = tfrecord_frame(data);
  ASSERT_EQ(rec.size(), 8 + 4 + data.size() + 4);
  EXPECT_EQ(little_endian(rec, 0, 8), data.size());
  EXPECT_EQ(little_endian(rec, 8, 4), masked_crc32c(rec.substr(0, 8)));
  EXPECT_EQ(rec.substr(12, data.size()), data);
  EXPECT_EQ(little_endian(rec, 12 + data.size(), 4), masked_crc32c(data));
}

}  // namespace
}  // namespace hpctrain
