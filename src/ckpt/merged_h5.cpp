// The merged .h5 format: written into the HDF5 layout of its specs (ckpt/h5_layout.h, the one
// the shard writer uses), read back with io/h5_tensor.h.
#include "ckpt/merged_h5.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "ckpt/dir_ops.h"
#include "ckpt/h5_layout.h"
#include "ckpt/merged_file.h"
#include "io/h5_tensor.h"
#include "io/h5_util.h"
#include "runtime/check.h"
#include "runtime/tensor_text.h"

namespace hpctrain::ckpt {

namespace {

// HDF5's part of the file (planned from the specs) is written at open, each tensor's bytes at
// their offset as they come.
class MergedH5Writer : public MergedFileWriter {
 public:
  MergedH5Writer(const std::string& path, const nlohmann::json& meta, std::vector<TensorSpec> specs)
      : MergedFileWriter(std::move(specs)), path_(path) {
    H5LayoutInput in;
    in.datasets = this->specs();
    in.root_attrs = {{"hpctrain_meta", meta.dump()}};
    layout_ = build_h5_layout(path, in);
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error("cannot create " + path + ": " + std::strerror(errno));
    if (::ftruncate(fd_, static_cast<off_t>(layout_.size)) != 0)
      throw Error("write " + path + " failed: " + std::strerror(errno));
    for (const auto& sg : layout_.segments) pwrite_all(fd_, layout_.meta.data() + sg.meta_off, sg.len, sg.file_off, path);
    layout_.meta = {};
  }
  ~MergedH5Writer() override {
    if (fd_ >= 0) ::close(fd_);
  }

 protected:
  void write(size_t i, const at::Tensor& t) override {
    if (layout_.offsets[i] >= 0) pwrite_all(fd_, t.data_ptr(), t.nbytes(), static_cast<uint64_t>(layout_.offsets[i]), path_);
  }
  void finish() override {
    if (::fsync(fd_) != 0) throw Error("fsync " + path_ + " failed: " + std::strerror(errno));
    ::close(std::exchange(fd_, -1));
  }

 private:
  std::string path_;
  H5Layout layout_;
  int fd_ = -1;
};

}  // namespace

std::unique_ptr<MergedFileWriter> open_merged_h5(const std::string& path, const nlohmann::json& meta,
                                                 std::vector<TensorSpec> specs) {
  return std::make_unique<MergedH5Writer>(path, meta, std::move(specs));
}

CheckpointState read_merged_h5(const std::string& path) {
  h5::Handle file = h5::open_h5(path);
  CheckpointState st;
  for (const auto& name : h5::list_datasets(file.get())) {
    try {
      st.tensors.emplace_back(name, h5::read_tensor(file.get(), name));
    } catch (const Error& err) {
      throw Error(path + ": tensor " + printable(name) + ": " + err.what());
    }
  }
  std::string s;
  if (h5::read_attr_string(file.get(), "hpctrain_meta", &s)) {
    nlohmann::json j = nlohmann::json::parse(s, nullptr, false);
    if (j.is_discarded()) throw Error(path + ": attribute hpctrain_meta is not JSON");
    st.meta = meta_from_merged(j);
  }
  return st;
}

}  // namespace hpctrain::ckpt
