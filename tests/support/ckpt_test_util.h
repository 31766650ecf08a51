// Helpers shared by the checkpoint tests (unit and MPI): temp dirs and a state that covers
// every dtype, empty and 0-d tensors.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "ckpt/checkpoint.h"
#include "ckpt/dir_ops.h"
#include "runtime/check.h"
#include "support/error_of.h"  // error_of(f)

namespace hpctrain::testing {

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hpctrain_ckpt_XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

// Arms the checkpoint writer's fault hook (ckpt/dir_ops.h) for this scope: a write that reaches
// `point` fails there with "injected checkpoint fault at <point>". `on` false arms nothing (so
// that one rank alone can fail).
struct InjectFault {
  explicit InjectFault(std::string point, bool on = true) {
    if (on)
      ckpt::set_fault_hook([point](const std::string& p) {
        if (p == point) throw Error("injected checkpoint fault at " + p);
      });
  }
  ~InjectFault() { ckpt::set_fault_hook({}); }
  InjectFault(const InjectFault&) = delete;
  InjectFault& operator=(const InjectFault&) = delete;
};

// Deterministic values per (seed, dtype) so equality checks are exact.
inline at::Tensor values(at::IntArrayRef shape, at::ScalarType dt, int seed) {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  at::Tensor base = (at::arange(n, at::kDouble) * 0.37 + seed).sin() * 100;
  if (dt == at::kBool) return (base > 0).reshape(shape);
  if (dt == at::kByte) return base.abs().to(at::kByte).reshape(shape);
  return base.to(dt).reshape(shape);
}

inline CheckpointState sample_state(int seed = 1) {
  CheckpointState s;
  s.tensors = {
      {"model/features.0.weight", values({8, 1, 3, 3}, at::kFloat, seed)},
      {"model/features.0.bias", values({8}, at::kFloat, seed)},
      {"model/features.1.running_mean", values({8}, at::kFloat, seed + 1)},
      {"model/features.1.num_batches_tracked", at::scalar_tensor(int64_t{7} + seed, at::kLong)},
      {"model/fc.weight", values({4, 6}, at::kDouble, seed)},
      {"optim/fc.weight.momentum_buffer", values({4, 6}, at::kHalf, seed)},
      {"optim/fc.weight.exp_avg", values({4, 6}, at::kBFloat16, seed)},
      {"state/sampler.perm", values({10}, at::kInt, seed)},
      {"state/rng.cpu", values({16}, at::kByte, seed)},
      {"state/mask", values({5}, at::kBool, seed)},
      {"state/empty", at::empty({0, 3}, at::kFloat)},
      {"state/scale", at::scalar_tensor(65536.0, at::kFloat)},
  };
  s.meta = {{"epoch", 3}, {"config", {{"model", "cnn"}, {"lr", 0.1}}}, {"sampler", {{"offset", 128}}}};
  return s;
}

// The checkpoint name DIR/latest points at ("" if none).
inline std::string read_latest(const std::string& dir) {
  std::ifstream in(dir + "/latest");
  std::string name;
  in >> name;
  return name;
}

// The tensor named `name` in `s` (undefined if none).
inline at::Tensor find_tensor(const CheckpointState& s, const std::string& name) {
  for (auto& [n, t] : s.tensors)
    if (n == name) return t;
  return {};
}

inline void expect_same_tensors(const CheckpointState& want, const CheckpointState& got) {
  ASSERT_EQ(want.tensors.size(), got.tensors.size());
  for (size_t i = 0; i < want.tensors.size(); ++i) {
    const auto& [wn, wt] = want.tensors[i];
    const auto& [gn, gt] = got.tensors[i];
    EXPECT_EQ(wn, gn);
    EXPECT_EQ(wt.scalar_type(), gt.scalar_type()) << wn;
    EXPECT_EQ(wt.sizes(), gt.sizes()) << wn;
    EXPECT_TRUE(at::equal(wt.cpu(), gt.cpu())) << wn;
  }
}

}  // namespace hpctrain::testing
