// The merged .h5 format: written through the shard writer's HDF5 image (ckpt/h5_image.h),
// read back with io/h5_tensor.h.
#include "ckpt/merged_h5.h"

#include "ckpt/h5_image.h"
#include "ckpt/merged_file.h"
#include "io/h5_tensor.h"
#include "io/h5_util.h"
#include "runtime/check.h"
#include "runtime/tensor_text.h"

namespace hpctrain::ckpt {

void write_merged_h5(const std::string& path, const nlohmann::json& meta, const NamedTensors& tensors) {
  H5FileSpec spec;
  spec.tensors = &tensors;
  spec.root_attrs = {{"hpctrain_meta", meta.dump()}};
  write_h5_file(path, spec);
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
