// read_checkpoint and find_resume (ckpt/checkpoint.h): a merged file through its format
// (ckpt/merged_file.h), a step directory through resolution (ckpt/resolve.h) and
// verification (ckpt/verify.h).
#include <ATen/ATen.h>

#include <cstdio>

#include "ckpt/checkpoint.h"
#include "ckpt/dir_ops.h"
#include "ckpt/formats/hf_gpt2.h"
#include "ckpt/merged_file.h"
#include "ckpt/resolve.h"
#include "ckpt/verify.h"
#include "runtime/check.h"
#include "runtime/tensor_text.h"

namespace hpctrain::ckpt {

CheckpointState read_impl(const std::string& path, c10::Device device) {
  CheckpointState st;
  const MergedFileFormat* format = is_merged_file(path) ? merged_file_format(merged_format_of(path)) : nullptr;
  if (is_hf_dir(path)) {
    st = read_hf_gpt2_dir(path);  // a Hugging Face GPT-2 directory, as a --model gpt checkpoint
  } else if (format) {
    st = format->read(path);
  } else {
    Manifest m = verify_checkpoint(resolve_checkpoint_path(path), [&](const TensorEntry& e, at::Tensor t) {
      st.tensors.emplace_back(e.name, std::move(t));
    });
    st.meta = m.meta;
    st.meta["step"] = m.step;
    st.meta["world_size"] = m.world_size;
    st.meta["versions"] = m.versions;
  }
  check_merged_checksums(st, path);
  if (!device.is_cpu())
    for (auto& [name, t] : st.tensors) t = t.to(device);
  return st;
}

}  // namespace hpctrain::ckpt

namespace hpctrain {

CheckpointState read_checkpoint(const std::string& path, c10::Device device) {
  try {
    return ckpt::read_impl(path, device);
  } catch (const Error& e) {
    throw Error(printable(e.what()));
  }
}

std::optional<std::string> find_resume(const std::string& dir, const std::string& mode) {
  if (mode == "none") return std::nullopt;
  if (mode != "auto") {
    try {
      std::string p = ckpt::resolve_checkpoint_path(mode);
      ckpt::verify_checkpoint(p);
      return p;
    } catch (const Error& e) {
      throw Error(std::string("--resume ") + mode + ": " + printable(e.what()));
    }
  }
  auto all = ckpt::complete_checkpoints(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      ckpt::verify_checkpoint(it->second);
      return it->second;
    } catch (const Error& e) {
      std::fprintf(stderr, "hpctrain: WARNING: skipping checkpoint %s: %s; trying the previous one\n",
                   it->second.c_str(), e.what());
    }
  }
  return std::nullopt;
}

}  // namespace hpctrain
