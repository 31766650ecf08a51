// The streaming writer every single-file format of `ckpt merge` implements (internal to
// src/ckpt): the file is opened knowing every tensor's name, dtype and shape and the metadata
// (so headers and layouts are written first), then takes the tensors one at a time, in the
// order of those specs, and holds none of them after add() returns (the TorchScript archive
// alone keeps them until close: LibTorch's archive writer takes a whole module).
//
// Contract:
// - add(t): the next tensor; contiguous, on the CPU, of its spec's dtype and shape (anything
//   else throws hpctrain::Error naming the tensor, before a byte of it is written).
// - close(): after the last add (fewer throws); writes what is left and fsyncs the file.
// - Not atomic: the caller writes a .tmp, renames it after close(), and removes it when
//   anything throws (a writer destroyed without close() leaves a partial file behind).
#pragma once

#include <ATen/core/Tensor.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/tensor_spec.h"

namespace hpctrain::ckpt {

class MergedFileWriter {
 public:
  explicit MergedFileWriter(std::vector<TensorSpec> specs);
  virtual ~MergedFileWriter() = default;
  MergedFileWriter(const MergedFileWriter&) = delete;
  MergedFileWriter& operator=(const MergedFileWriter&) = delete;

  void add(const at::Tensor& t);
  void close();
  const std::vector<TensorSpec>& specs() const { return specs_; }

 protected:
  virtual void write(size_t index, const at::Tensor& t) = 0;  // t checked against specs()[index]
  virtual void finish() = 0;

 private:
  std::vector<TensorSpec> specs_;
  size_t next_ = 0;
};

// Opens `path` (created or truncated) for `meta` (the metadata the file carries) and `specs`.
using MergedWriterOpen = std::unique_ptr<MergedFileWriter> (*)(const std::string& path, const nlohmann::json& meta,
                                                                std::vector<TensorSpec> specs);

// Writes `tensors` (contiguous CPU) whole through `open`'s writer: for callers that hold them.
void write_merged_file(MergedWriterOpen open, const std::string& path, const nlohmann::json& meta,
                       const std::vector<std::pair<std::string, at::Tensor>>& tensors);

}  // namespace hpctrain::ckpt
