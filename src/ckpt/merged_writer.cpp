// MergedFileWriter's checks: each tensor against its spec, in order, and every spec written.
#include "ckpt/merged_writer.h"

#include "runtime/check.h"
#include "runtime/tensor_text.h"

namespace hpctrain::ckpt {

MergedFileWriter::MergedFileWriter(std::vector<TensorSpec> specs) : specs_(std::move(specs)) {}

void MergedFileWriter::add(const at::Tensor& t) {
  if (next_ >= specs_.size()) throw Error("merged file: more tensors than the " + std::to_string(specs_.size()) + " planned");
  const TensorSpec& s = specs_[next_];
  if (!t.device().is_cpu() || !t.is_contiguous() || t.scalar_type() != s.dtype || t.sizes().vec() != s.shape)
    throw Error("merged file: tensor " + printable(s.name) + " is " + c10::toString(t.scalar_type()) + " " +
                c10::str(t.sizes()) + ", planned " + c10::toString(s.dtype) + " " +
                c10::str(c10::IntArrayRef(s.shape)) + " (contiguous, on the CPU)");
  write(next_++, t);
}

void MergedFileWriter::close() {
  if (next_ != specs_.size())
    throw Error("merged file: " + std::to_string(next_) + " of " + std::to_string(specs_.size()) + " tensors written");
  finish();
}

void write_merged_file(MergedWriterOpen open, const std::string& path, const nlohmann::json& meta,
                       const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  std::vector<TensorSpec> specs;
  for (const auto& [name, t] : tensors) specs.push_back(TensorSpec::of(name, t));
  std::unique_ptr<MergedFileWriter> w = open(path, meta, std::move(specs));
  for (const auto& nt : tensors) w->add(nt.second);
  w->close();
}

}  // namespace hpctrain::ckpt
