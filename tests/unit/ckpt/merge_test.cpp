// ckpt merge (h5 read back by Debian's h5py; the TorchScript archive by torch::load into a nested
// module; .pt state dicts and .safetensors read back with every dtype), format selection and its
// errors, load_model (round trip and mismatch report from every format), the merged files'
// metadata and checksums, inspect. Python's torch.load / safetensors: tests/e2e/test_ckpt_export.sh.
#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/serialize.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "ckpt/merge.h"
#include "ckpt/store.h"
#include "runtime/check.h"
#include "support/ckpt_test_util.h"

using namespace hpctrain;
using namespace hpctrain::testing;

namespace {

struct NetImpl : torch::nn::Module {
  explicit NetImpl(int fc_in = 6) {
    features = register_module("features", torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 8, 3)),
                                                                 torch::nn::BatchNorm2d(8)));
    fc = register_module("fc", torch::nn::Linear(fc_in, 4));
  }
  torch::nn::Sequential features{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

// Model tensors under model/, plus optimizer state, as the trainer would hand them over.
CheckpointState state_of(Net& net) {
  CheckpointState s;
  int i = 0;
  for (auto& p : net->named_parameters()) {
    at::Tensor v = values(p.value().sizes(), at::kFloat, ++i);
    s.tensors.emplace_back("model/" + p.key(), v);
    s.tensors.emplace_back("optim/" + p.key() + ".momentum_buffer", v * 2);
  }
  for (auto& b : net->named_buffers()) s.tensors.emplace_back("model/" + b.key(), b.value().clone() + 3);
  s.tensors.emplace_back("state/rng.cpu", values({8}, at::kByte, 1));
  s.meta = {{"epoch", 1}, {"config", {{"model", "test"}}}};
  return s;
}

std::string run(const std::string& cmd) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  std::array<char, 4096> buf;
  while (p && fgets(buf.data(), buf.size(), p.get())) out += buf.data();
  return out;
}

}  // namespace

TEST(Merge, H5ReadByH5pyHasEqualValues) {
  TempDir d;
  Net net;
  CheckpointState s = state_of(net);
  s.tensors.emplace_back("model/extra.bf16", values({3}, at::kBFloat16, 2));
  s.tensors.emplace_back("model/extra.half", values({3}, at::kHalf, 2));
  s.tensors.emplace_back("model/extra.mask", values({4}, at::kBool, 2));
  ckpt::write_checkpoint_sync({d.path}, 7, s);
  std::string out = d.path + "/merged.h5";
  ckpt::merge_checkpoint(d.path, out, {.full = true});

  std::string py =
      "import h5py, json, numpy as np\n"
      "f = h5py.File('" +
      out +
      "', 'r')\n"
      "r = {}\n"
      "def v(name, o):\n"
      "    if isinstance(o, h5py.Dataset):\n"
      "        a = o[()]\n"
      "        dt = o.attrs['dtype']\n"
      "        dt = dt.decode() if isinstance(dt, bytes) else str(dt)\n"
      "        if dt == 'bfloat16': a = (np.asarray(a).astype(np.uint32) << 16).view(np.float32)\n"
      "        r[name] = dict(np_dtype=str(o.dtype), shape=list(o.shape), values=np.asarray(a, "
      "dtype=np.float64).ravel().tolist())\n"
      "f.visititems(v)\n"
      "r['__meta_step'] = json.loads(f.attrs['hpctrain_meta'])['step']\n"
      "print(json.dumps(r))\n";
  std::string script = d.path + "/read.py";
  std::ofstream(script) << py;
  nlohmann::json got = nlohmann::json::parse(run("/usr/bin/python3 " + script));
  EXPECT_EQ(got["__meta_step"], 7);
  EXPECT_EQ(got["model/features.0.weight"]["np_dtype"], "float32");
  EXPECT_EQ(got["model/extra.half"]["np_dtype"], "float16");
  EXPECT_EQ(got["model/extra.bf16"]["np_dtype"], "uint16");
  EXPECT_EQ(got["model/extra.mask"]["np_dtype"], "bool");
  EXPECT_EQ(got["model/features.1.num_batches_tracked"]["np_dtype"], "int64");
  size_t checked = 0;
  for (auto& [name, t] : s.tensors) {
    ASSERT_TRUE(got.contains(name)) << name;
    EXPECT_EQ(got[name]["shape"].get<std::vector<int64_t>>(), t.sizes().vec()) << name;
    auto vals = got[name]["values"].get<std::vector<double>>();
    at::Tensor want = t.to(at::kDouble).reshape({-1});
    ASSERT_EQ(static_cast<int64_t>(vals.size()), want.numel()) << name;
    EXPECT_TRUE(at::equal(at::tensor(vals, at::kDouble), want)) << name;
    ++checked;
  }
  EXPECT_EQ(checked, s.tensors.size());

  // Without --full only model/; --dtype fp16 casts floating tensors only, and lists the others.
  ckpt::MergeReport rep = ckpt::merge_checkpoint(d.path, out, {.dtype = "fp16"});
  EXPECT_EQ(rep.format, "h5");
  EXPECT_NE(std::find(rep.kept.begin(), rep.kept.end(), "model/features.1.num_batches_tracked (int64)"),
            rep.kept.end());
  EXPECT_NE(std::find(rep.kept.begin(), rep.kept.end(), "model/extra.mask (bool)"), rep.kept.end());
  CheckpointState m = read_checkpoint(out, c10::kCPU);
  for (auto& [n, t] : m.tensors) EXPECT_EQ(n.rfind("model/", 0), 0u) << n;
  EXPECT_EQ(find_tensor(m, "model/fc.weight").scalar_type(), at::kHalf);
  EXPECT_EQ(find_tensor(m, "model/features.1.num_batches_tracked").scalar_type(), at::kLong);
  EXPECT_TRUE(at::equal(find_tensor(m, "model/fc.weight"), find_tensor(s, "model/fc.weight").to(at::kHalf)));
}

TEST(Merge, TorchScriptArchiveLoadsIntoNestedModuleWithTorchLoad) {
  TempDir d;
  Net src;
  CheckpointState s = state_of(src);
  ckpt::write_checkpoint_sync({d.path}, 3, s);
  std::string out = d.path + "/model.pt";
  ckpt::merge_checkpoint(d.path, out, {.format = "torchscript"});
  Net dst;
  torch::load(dst, out);
  size_t n = 0;
  for (auto& p : dst->named_parameters()) {
    EXPECT_TRUE(at::equal(p.value(), find_tensor(s, "model/" + p.key()))) << p.key();
    ++n;
  }
  for (auto& b : dst->named_buffers()) {
    EXPECT_TRUE(at::equal(b.value(), find_tensor(s, "model/" + b.key()))) << b.key();
    ++n;
  }
  EXPECT_EQ(n, 9u);  // conv w,b; bn w,b,mean,var,count; fc w,b
}

TEST(LoadModel, FromStepDirAndMergedFile) {
  TempDir d;
  Net src;
  CheckpointState s = state_of(src);
  ckpt::write_checkpoint_sync({d.path}, 3, s);
  ckpt::merge_checkpoint(d.path, d.path + "/m.h5", {});
  ckpt::merge_checkpoint(d.path, d.path + "/m.pt", {});
  ckpt::merge_checkpoint(d.path, d.path + "/m.pth", {.format = "pt"});
  ckpt::merge_checkpoint(d.path, d.path + "/m.safetensors", {});
  ckpt::merge_checkpoint(d.path, d.path + "/ts.pt", {.format = "torchscript"});
  for (std::string path : {d.path, d.path + "/latest", d.path + "/step-00000003", d.path + "/m.h5", d.path + "/m.pt",
                           d.path + "/m.pth", d.path + "/m.safetensors", d.path + "/ts.pt"}) {
    Net dst;
    load_model(path, *dst, c10::kCPU);
    EXPECT_TRUE(at::equal(dst->fc->weight, find_tensor(s, "model/fc.weight"))) << path;
    EXPECT_TRUE(at::equal(dst->features[1]->as<torch::nn::BatchNorm2d>()->running_var,
                          find_tensor(s, "model/features.1.running_var")))
        << path;
  }
}

TEST(LoadModel, MismatchListsMissingUnexpectedAndShapes) {
  TempDir d;
  Net src;
  CheckpointState s = state_of(src);
  s.tensors.emplace_back("model/head.weight", at::ones({2}));
  for (auto it = s.tensors.begin(); it != s.tensors.end(); ++it)
    if (it->first == "model/features.0.bias") {
      s.tensors.erase(it);
      break;
    }
  ckpt::write_checkpoint_sync({d.path}, 3, s);
  ckpt::merge_checkpoint(d.path, d.path + "/m.pt", {});
  ckpt::merge_checkpoint(d.path, d.path + "/m.safetensors", {});
  for (std::string path : {d.path, d.path + "/m.pt", d.path + "/m.safetensors"}) {  // the same report from every format
    Net other(5);                                                                   // fc: [4,5] instead of [4,6]
    std::string err;
    try {
      load_model(path, *other, c10::kCPU);
    } catch (const Error& e) {
      err = e.what();
    }
    EXPECT_NE(err.find("checkpoint " + path + " does not match the model"), std::string::npos) << err;
    EXPECT_NE(err.find("missing keys [features.0.bias]"), std::string::npos) << err;
    EXPECT_NE(err.find("unexpected keys [head.weight]"), std::string::npos) << err;
    EXPECT_NE(err.find("fc.weight: saved [4,6] vs model [4,5]"), std::string::npos) << err;
  }
}

TEST(Merge, EveryFormatCarriesMetadataAndReadsLikeTheStepDir) {
  TempDir d;
  Net src;
  CheckpointState s = state_of(src);
  s.meta["model"] = "cnn";
  s.meta["sample_shape"] = {1, 28, 28};
  s.meta["num_classes"] = 10;
  ckpt::write_checkpoint_sync({d.path}, 9, s, 2);
  CheckpointState dir = read_checkpoint(d.path, c10::kCPU);
  for (std::string out : {"m.pt", "m.safetensors", "m.h5", "ts.pt"}) {
    ckpt::merge_checkpoint(d.path, d.path + "/" + out, {.format = out == "ts.pt" ? "torchscript" : ""});
    CheckpointState pt = read_checkpoint(d.path + "/" + out, c10::kCPU);
    SCOPED_TRACE(out);
    for (const char* k : {"model", "sample_shape", "num_classes", "epoch", "step", "world_size", "versions"})
      EXPECT_EQ(pt.meta[k], dir.meta[k]) << k;
    EXPECT_EQ(pt.meta["step"], 9);
    EXPECT_EQ(pt.meta["world_size"], 2);
    size_t model_tensors = 0;
    for (auto& [name, t] : dir.tensors) {
      if (name.rfind("model/", 0) != 0) continue;
      at::Tensor got = find_tensor(pt, name);
      ASSERT_TRUE(got.defined()) << name;
      EXPECT_EQ(got.scalar_type(), t.scalar_type()) << name;
      EXPECT_TRUE(at::equal(got, t)) << name;
      ++model_tensors;
    }
    EXPECT_EQ(model_tensors, 9u);
    EXPECT_EQ(pt.tensors.size(), model_tensors);    // model/ only, nothing from optim/ or state/
    EXPECT_FALSE(pt.meta.contains("tensor_xxh3"));  // checked and dropped by read_checkpoint
  }
}

TEST(Merge, BadPtFileIsOneLineErrorNamingIt) {
  TempDir d;
  Net src;
  ckpt::write_checkpoint_sync({d.path}, 3, state_of(src));
  std::string good = d.path + "/m.pt";
  ckpt::merge_checkpoint(d.path, good, {});
  auto size = std::filesystem::file_size(good);
  std::filesystem::copy_file(good, d.path + "/cut.pt");
  std::filesystem::resize_file(d.path + "/cut.pt", size / 2);
  std::ofstream(d.path + "/text.pt") << "not an archive\n";
  for (std::string bad : {d.path + "/cut.pt", d.path + "/text.pt"}) {
    std::string err;
    try {
      read_checkpoint(bad, c10::kCPU);
    } catch (const Error& e) {
      err = e.what();
    }
    EXPECT_EQ(err.rfind(bad + " is not a readable PyTorch file", 0), 0u) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  }
  // A LibTorch archive, but not one from `ckpt merge`: eval could not rebuild the model.
  torch::save(src, d.path + "/plain.pt");
  std::string err;
  try {
    read_checkpoint(d.path + "/plain.pt", c10::kCPU);
  } catch (const Error& e) {
    err = e.what();
  }
  EXPECT_NE(err.find("plain.pt has no hpctrain_meta attribute"), std::string::npos) << err;
}

TEST(Inspect, ShowsStepEpochConfigAndTensorTable) {
  TempDir d;
  CheckpointState s = sample_state();
  ckpt::write_checkpoint_sync({d.path}, 400, s, 4);
  std::string text = ckpt::inspect_checkpoint(d.path);
  EXPECT_NE(text.find("step 400, epoch 3, world size at save 4"), std::string::npos) << text;
  EXPECT_NE(text.find("config: lr=0.1 model=\"cnn\""), std::string::npos) << text;
  EXPECT_NE(text.find("optim/fc.weight.exp_avg"), std::string::npos) << text;
  EXPECT_NE(text.find("bfloat16"), std::string::npos) << text;
  EXPECT_NE(text.find("12 tensors, 1 shards"), std::string::npos) << text;
}
