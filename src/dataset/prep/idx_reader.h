// Reader for gzip-compressed idx files (the MNIST/Fashion-MNIST distribution format).
// Contract: returns the full payload or throws hpctrain::Error with one line naming the file and
// the problem: not a gzip stream, truncated or corrupt stream (zlib's CRC/length check), wrong
// magic number, dimensions other than expected, or trailing bytes after the payload.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain {

struct IdxArray {
  std::vector<int64_t> dims;  // from the header, e.g. {60000, 28, 28}
  std::vector<uint8_t> data;  // product(dims) bytes
};

// Reads an idx file of unsigned bytes with `rank` dimensions (magic 0x0000 08 <rank>).
IdxArray read_idx_gz(const std::string& path, int rank);

}  // namespace hpctrain
