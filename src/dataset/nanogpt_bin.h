// nanoGPT's token files: DIR/train.bin and DIR/val.bin, raw little-endian uint16 ids (what
// nanoGPT's data/*/prepare.py scripts write with numpy's tofile), read through a read-only
// memory map, never read whole. DIR/meta.pkl, when present, gives the vocabulary size (read in
// train/, which may use the checkpoint stage's safe pickle parser: train/nanogpt_meta.h).
//
// Contract:
// - is_nanogpt_dir(dir): DIR/train.bin exists. split_files (data_source.h) then gives
//   DIR/train.bin for "train" and DIR/val.bin for "test" (val.bin is the test split).
// - MappedTokens(path): the file mapped read-only (MAP_SHARED; the page cache holds what was
//   touched). One hpctrain::Error line naming the file: it does not exist or cannot be opened,
//   it is empty, or its byte count is odd (not whole uint16 ids).
// - first_bad_id(vocab): the first position whose id is >= vocab (a pass over the mapping in
//   4 Mi-id chunks, min/max first), or -1; the id in *value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hpctrain {

bool is_nanogpt_dir(const std::string& dir);
// Whether `path` names a nanoGPT token file (ends in ".bin").
bool is_nanogpt_bin(const std::string& path);

class MappedTokens {
 public:
  explicit MappedTokens(const std::string& path);
  ~MappedTokens();
  MappedTokens(const MappedTokens&) = delete;
  MappedTokens& operator=(const MappedTokens&) = delete;

  const uint16_t* ids() const { return ids_; }
  int64_t length() const { return length_; }
  const std::string& path() const { return path_; }
  int64_t first_bad_id(int64_t vocab, int64_t* value) const;

 private:
  std::string path_;
  const uint16_t* ids_ = nullptr;
  size_t bytes_ = 0;
  int64_t length_ = 0;
};

}  // namespace hpctrain
