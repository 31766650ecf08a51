// MappedTokens: open + fstat + mmap (PROT_READ) of a uint16 id file; the id check reads the
// mapping once in chunks. The ids are little-endian on disk; this build reads them natively
// (every platform hpctrain builds for is little-endian; a big-endian host is refused).
#include "dataset/nanogpt_bin.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "runtime/check.h"

namespace hpctrain {

static_assert(std::endian::native == std::endian::little, "nanoGPT .bin files hold little-endian uint16 ids");

bool is_nanogpt_dir(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(dir + "/train.bin", ec);
}

bool is_nanogpt_bin(const std::string& path) {
  return path.size() > 4 && path.compare(path.size() - 4, 4, ".bin") == 0;
}

MappedTokens::MappedTokens(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) throw Error("data file " + path + " does not exist (nanoGPT layout: train.bin and val.bin)");
    throw Error("cannot open " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error("cannot stat " + path + ": " + std::strerror(e));
  }
  bytes_ = size_t(st.st_size);
  if (bytes_ == 0) {
    ::close(fd);
    throw Error(path + " is empty (0 bytes; nanoGPT token files hold uint16 ids)");
  }
  if (bytes_ % 2) {
    ::close(fd);
    throw Error(path + " has an odd byte count (" + std::to_string(bytes_) +
                "): not a file of uint16 token ids (nanoGPT's train.bin/val.bin)");
  }
  void* p = ::mmap(nullptr, bytes_, PROT_READ, MAP_SHARED, fd, 0);
  const int e = errno;
  ::close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED) throw Error("cannot memory-map " + path + ": " + std::strerror(e));
  ids_ = static_cast<const uint16_t*>(p);
  length_ = int64_t(bytes_ / 2);
}

MappedTokens::~MappedTokens() {
  if (ids_) ::munmap(const_cast<uint16_t*>(ids_), bytes_);
}

int64_t MappedTokens::first_bad_id(int64_t vocab, int64_t* value) const {
  if (vocab > 65535) return -1;  // every uint16 id is < vocab
  constexpr int64_t kChunk = int64_t{4} << 20;
  for (int64_t at = 0; at < length_; at += kChunk) {
    const int64_t n = std::min(kChunk, length_ - at);
    const uint16_t hi = *std::max_element(ids_ + at, ids_ + at + n);
    if (hi < vocab) continue;
    for (int64_t i = at; i < at + n; ++i)
      if (ids_[i] >= vocab) {
        *value = ids_[i];
        return i;
      }
  }
  return -1;
}

}  // namespace hpctrain
