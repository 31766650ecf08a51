// The exported single files: the format comes from the extension (--format overrides an
// unknown one, never contradicts a known one); bad --out and --full combinations are one-line
// errors that write nothing; .pt and .safetensors carry every dtype, empty and 0-d tensors
// (also cast with --dtype); a damaged merged file fails its tensor checksum on read; the .pt's
// pickle uses no type tags.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "ckpt/merge.h"
#include "ckpt/store.h"
#include "runtime/check.h"
#include "support/ckpt_test_util.h"

using namespace hpctrain;
using namespace hpctrain::testing;
namespace fs = std::filesystem;

namespace {

// Model tensors of every dtype a checkpoint holds, plus optimizer state.
CheckpointState all_dtypes() {
  CheckpointState s;
  s.tensors = {{"model/f32", values({4, 3}, at::kFloat, 1)},
               {"model/f64", values({5}, at::kDouble, 2)},
               {"model/f16", values({2, 2}, at::kHalf, 3)},
               {"model/bf16", values({7}, at::kBFloat16, 4)},
               {"model/i32", values({3}, at::kInt, 5)},
               {"model/bn.num_batches_tracked", at::scalar_tensor(int64_t{12}, at::kLong)},
               {"model/u8", values({6}, at::kByte, 6)},
               {"model/mask", values({5}, at::kBool, 7)},
               {"model/empty", at::empty({0, 4}, at::kFloat)},
               {"model/scalar", at::scalar_tensor(2.5, at::kFloat)},
               {"optim/f32.exp_avg", values({4, 3}, at::kFloat, 8)}};
  s.meta = {{"epoch", 1}, {"model", "test"}};
  return s;
}

}  // namespace

TEST(Export, FormatFromExtensionAndFlag) {
  EXPECT_EQ(ckpt::merge_format("w.pt", ""), "pt");
  EXPECT_EQ(ckpt::merge_format("w.pth", ""), "pt");
  EXPECT_EQ(ckpt::merge_format("d/w.safetensors", ""), "safetensors");
  EXPECT_EQ(ckpt::merge_format("w.h5", ""), "h5");
  EXPECT_EQ(ckpt::merge_format("w.hdf5", "h5"), "h5");
  EXPECT_EQ(ckpt::merge_format("w.bin", "safetensors"), "safetensors");  // unknown extension: the flag decides
  EXPECT_EQ(ckpt::merge_format("w.pt", "torchscript"), "torchscript");
  std::string err = error_of([] { ckpt::merge_format("w.bin", ""); });
  EXPECT_NE(err.find("cannot tell the format of w.bin from its extension '.bin'"), std::string::npos) << err;
  err = error_of([] { ckpt::merge_format("w.pt", "h5"); });
  EXPECT_NE(err.find("--format h5 contradicts the extension of w.pt (.pt is pt)"), std::string::npos) << err;
  err = error_of([] { ckpt::merge_format("w.safetensors", "torchscript"); });
  EXPECT_NE(err.find("contradicts"), std::string::npos) << err;
}

TEST(Export, BadOutputsAreErrorsThatWriteNothing) {
  TempDir d;
  ckpt::write_checkpoint_sync({d.path}, 2, all_dtypes());
  std::string err = error_of([&] { ckpt::merge_checkpoint(d.path, d.path + "/nope/w.pt", {}); });
  EXPECT_NE(err.find("the directory of --out " + d.path + "/nope/w.pt does not exist"), std::string::npos) << err;
  err = error_of([&] { ckpt::merge_checkpoint(d.path, d.path + "/w.pt", {.full = true}); });
  EXPECT_NE(err.find("--full (optimizer and trainer state) needs an .h5 output"), std::string::npos) << err;
  err = error_of([&] { ckpt::merge_checkpoint(d.path, d.path + "/w.onnx", {}); });
  EXPECT_NE(err.find("cannot tell the format"), std::string::npos) << err;
  for (const auto& e : fs::directory_iterator(d.path))
    EXPECT_TRUE(e.is_directory() || e.path().filename() == "latest") << "written: " << e.path();
}

TEST(Export, PtAndSafetensorsCarryEveryDtypeAndCast) {
  TempDir d;
  CheckpointState s = all_dtypes();
  ckpt::write_checkpoint_sync({d.path}, 2, s);
  for (std::string out : {"w.pt", "w.safetensors"}) {
    SCOPED_TRACE(out);
    ckpt::MergeReport r = ckpt::merge_checkpoint(d.path + "/latest", d.path + "/" + out, {});
    EXPECT_EQ(r.tensors, 10u);
    EXPECT_TRUE(r.kept.empty());
    CheckpointState got = read_checkpoint(d.path + "/" + out, c10::kCPU);
    EXPECT_EQ(got.tensors.size(), 10u);  // model/ only
    EXPECT_EQ(got.meta["model"], "test");
    for (auto& [name, t] : s.tensors) {
      if (name.rfind("model/", 0) != 0) continue;
      at::Tensor g = find_tensor(got, name);
      ASSERT_TRUE(g.defined()) << name;
      EXPECT_EQ(g.scalar_type(), t.scalar_type()) << name;
      EXPECT_EQ(g.sizes(), t.sizes()) << name;
      EXPECT_TRUE(at::equal(g, t)) << name;
    }
    r = ckpt::merge_checkpoint(d.path, d.path + "/bf16-" + out, {.dtype = "bf16"});
    EXPECT_EQ(r.kept, (std::vector<std::string>{"model/i32 (int32)", "model/bn.num_batches_tracked (int64)",
                                                "model/u8 (uint8)", "model/mask (bool)"}));
    got = read_checkpoint(d.path + "/bf16-" + out, c10::kCPU);
    EXPECT_EQ(find_tensor(got, "model/f64").scalar_type(), at::kBFloat16);
    EXPECT_TRUE(at::equal(find_tensor(got, "model/f32"), find_tensor(s, "model/f32").to(at::kBFloat16)));
    EXPECT_EQ(find_tensor(got, "model/bn.num_batches_tracked").scalar_type(), at::kLong);
  }
}

TEST(Export, DamagedMergedFileFailsItsTensorChecksum) {
  TempDir d;
  CheckpointState s = all_dtypes();
  s.tensors.emplace_back("model/big", values({4096}, at::kFloat, 9));
  ckpt::write_checkpoint_sync({d.path}, 2, s);
  for (std::string out : {"w.pt", "w.safetensors", "w.h5"}) {
    std::string path = d.path + "/" + out;
    ckpt::merge_checkpoint(d.path, path, {});
    std::string bytes;
    {
      std::ifstream in(path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    // The big tensor's values: find its first 16 bytes in the file and flip one after them.
    at::Tensor big = find_tensor(s, "model/big");
    size_t at = bytes.find(std::string(static_cast<const char*>(big.data_ptr()), 16));
    ASSERT_NE(at, std::string::npos) << out;
    bytes[at + 100] = static_cast<char>(bytes[at + 100] ^ 0x10);
    std::ofstream(path, std::ios::binary) << bytes;
    std::string err = error_of([&] { read_checkpoint(path, c10::kCPU); });
    // .pt: the zip's own CRC32 may speak first; either way the file is named and refused.
    EXPECT_EQ(err.rfind(path, 0), 0u) << out << ": " << err;
    if (out != "w.pt") EXPECT_NE(err.find("tensor model/big: checksum mismatch"), std::string::npos) << err;
  }
}

TEST(Export, PtPickleHasNoTypeTagsOrTorchScript) {
  TempDir d;
  ckpt::write_checkpoint_sync({d.path}, 2, all_dtypes());
  ckpt::merge_checkpoint(d.path, d.path + "/w.pt", {});
  std::ifstream in(d.path + "/w.pt", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(bytes.find("ccollections\nOrderedDict\n"), std::string::npos);
  EXPECT_NE(bytes.find("ctorch._utils\n_rebuild_tensor_v2\n"), std::string::npos);
  EXPECT_NE(bytes.find("ctorch\nBFloat16Storage\n"), std::string::npos);
  for (const char* banned : {"restore_type_tag", "torch.jit", "constants.pkl", "code/"})
    EXPECT_EQ(bytes.find(banned), std::string::npos) << banned;
}
