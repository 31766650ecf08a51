// read_idx_gz over zlib's gz* API. It refuses input zlib passes through uncompressed (gzdirect)
// and reads one byte past the payload, so that zlib checks the CRC-32 / length trailer and
// extra bytes are found.
#include "dataset/prep/idx_reader.h"

#include <zlib.h>

#include <memory>

#include "runtime/check.h"

namespace hpctrain {
namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using Gz = std::unique_ptr<gzFile_s, GzCloser>;

// Reads exactly n bytes or explains why not (zlib's message distinguishes corrupt data from a
// stream that ends early).
void read_exact(gzFile f, const std::string& path, void* dst, size_t n, const char* what) {
  size_t got = 0;
  auto* p = static_cast<unsigned char*>(dst);
  while (got < n) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - got, 1u << 30));
    int r = gzread(f, p + got, chunk);
    if (r < 0) {
      int err = 0;
      const char* msg = gzerror(f, &err);
      throw Error(path + ": corrupt gzip stream while reading " + what + " (" + msg + ")");
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  if (got < n) {
    int err = 0;
    const char* msg = gzerror(f, &err);
    throw Error(path + ": truncated: " + what + " needs " + std::to_string(n) + " bytes, got " + std::to_string(got) +
                (err != Z_OK ? std::string(" (") + msg + ")" : ""));
  }
}

uint32_t be32(const unsigned char* b) {
  return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | b[3];
}

}  // namespace

IdxArray read_idx_gz(const std::string& path, int rank) {
  Gz f(gzopen(path.c_str(), "rb"));
  if (!f) throw Error(path + ": cannot open (missing or unreadable)");
  unsigned char head[4];
  read_exact(f.get(), path, head, 4, "the idx magic number");
  // gzread passes non-gzip input through unchanged; a plain file is not what the package ships.
  if (gzdirect(f.get())) throw Error(path + ": not a gzip stream");
  const uint32_t magic = be32(head), want = 0x00000800u | uint32_t(rank);
  if (magic != want) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ": bad idx magic number 0x%08x (expected 0x%08x)", magic, want);
    throw Error(path + buf);
  }
  IdxArray a;
  std::vector<unsigned char> dims(4 * rank);
  read_exact(f.get(), path, dims.data(), dims.size(), "the idx dimensions");
  size_t total = 1;
  for (int d = 0; d < rank; ++d) {
    a.dims.push_back(be32(&dims[4 * d]));
    total *= static_cast<size_t>(a.dims.back());
  }
  a.data.resize(total);
  read_exact(f.get(), path, a.data.data(), total, "the idx payload");
  // Reading past the payload forces zlib to check the trailer (CRC-32 and length), and finds
  // extra bytes that would mean the header lies about the size.
  unsigned char extra;
  int r = gzread(f.get(), &extra, 1);
  int err = 0;
  const char* msg = gzerror(f.get(), &err);
  if (r < 0 || (err != Z_OK && err != Z_STREAM_END))
    throw Error(path + ": corrupt or truncated gzip stream after the payload (" + msg + ")");
  if (r > 0) throw Error(path + ": extra bytes after the idx payload (header/size mismatch)");
  return a;
}

}  // namespace hpctrain
