// `hpctrain ckpt inspect|verify|merge PATH`: thin wrappers over src/ckpt. PATH is a step
// directory, a checkpoint root (follows `latest`) or ROOT/latest. Rank 0 does the work (they
// read files only); a failure is reported once ("hpctrain: error: ckpt verify: ...") and every
// rank exits with code 2.
#include <cstdio>
#include <functional>

#include "ckpt/merge.h"
#include "ckpt/resolve.h"
#include "ckpt/verify.h"
#include "cli/commands.h"
#include "eval/hf_export.h"
#include "runtime/agree.h"
#include "runtime/check.h"
#include "runtime/tensor_text.h"
#include "runtime/world.h"

namespace hpctrain {
namespace {

int on_rank0(World& w, const char* what, const std::function<void()>& body) {
  run_on_rank0(w.mpi_comm(), std::string("ckpt ") + what, [&] {
    try {
      body();
    } catch (const Error& e) {
      throw Error(printable(e.what()));  // no raw bytes from a damaged file on the terminal
    }
    std::fflush(stdout);
  });
  return 0;
}

void verify(const std::string& path) {
  std::string dir = ckpt::resolve_checkpoint_path(path);
  int64_t bytes = 0;
  ckpt::Manifest m =
      ckpt::verify_checkpoint(dir, [&](const ckpt::TensorEntry& e, const at::Tensor&) { bytes += e.nbytes; });
  std::printf("OK %s: step %lld, %zu tensors in %zu shard(s), %lld bytes, file and tensor checksums match\n",
              dir.c_str(), static_cast<long long>(m.step), m.tensors.size(), m.shards.size(),
              static_cast<long long>(bytes));
}

void add(CLI::App& root, Action& chosen) {
  auto* c = root.add_subcommand("ckpt", "inspect, verify and merge checkpoints");
  c->require_subcommand(1);
  auto path = std::make_shared<std::string>();

  auto* ins = c->add_subcommand("inspect", "step, epoch, world size, config and tensor table");
  ins->add_option("PATH", *path, "step directory, checkpoint root or ROOT/latest")->required()->type_name("PATH");
  ins->callback([&chosen, path] {
    chosen = [path](World& w) {
      return on_rank0(w, "inspect", [&] { std::fputs(ckpt::inspect_checkpoint(*path).c_str(), stdout); });
    };
  });

  auto* ver = c->add_subcommand("verify", "re-read every tensor and check checksums, shapes, completeness");
  ver->add_option("PATH", *path, "step directory, checkpoint root or ROOT/latest")->required()->type_name("PATH");
  ver->callback(
      [&chosen, path] { chosen = [path](World& w) { return on_rank0(w, "verify", [&] { verify(*path); }); }; });

  auto* mrg =
      c->add_subcommand("merge", "one file from a sharded checkpoint: .h5, .pt (PyTorch state dict), .safetensors; "
                                 "streamed one tensor at a time (memory: about the largest tensor)");
  auto out = std::make_shared<std::string>();
  auto opts = std::make_shared<ckpt::MergeOptions>();
  mrg->add_option("PATH", *path, "step directory, checkpoint root or ROOT/latest")->required()->type_name("PATH");
  mrg->add_option("--out", *out, "output file; its extension picks the format: .h5/.hdf5, .pt/.pth, .safetensors (a directory with --format hf)")
      ->required()
      ->type_name("FILE");
  mrg->add_flag("--full", opts->full, "also the optim/ and state/ groups (.h5 only); a switch");
  mrg->add_option("--dtype", opts->dtype,
                  "cast floating tensors (others are kept, and listed); default: keep their dtypes")
      ->check(CLI::IsMember({"fp16", "bf16"}))
      ->type_name("{fp16,bf16}");
  mrg->add_option("--format", opts->format,
                  "overrides an unknown extension; must agree with a known one "
                  "(torchscript: the LibTorch module archive for torch::load in C++, held whole in memory while written; hf: --out is a directory "
                  "for transformers' GPT2LMHeadModel.from_pretrained, --model gpt checkpoints only)")
      ->check(CLI::IsMember({"h5", "pt", "safetensors", "torchscript", "hf"}))
      ->type_name("{h5,pt,safetensors,torchscript,hf}");
  mrg->callback([&chosen, path, out, opts] {
    chosen = [path, out, opts](World& w) {
      return on_rank0(w, "merge", [&] {
        if (opts->format == "hf") {
          if (opts->full) throw Error("--full (optimizer and trainer state) needs an .h5 output, not --format hf");
          std::printf("wrote %s (hf, %zu tensors)\n", out->c_str(), export_hf_gpt2(*path, *out, opts->dtype));
          return;
        }
        ckpt::MergeReport r = ckpt::merge_checkpoint(*path, *out, *opts);
        if (!r.kept.empty()) {
          std::string list;
          for (const auto& k : r.kept) list += (list.empty() ? "" : ", ") + k;
          std::fprintf(stderr,
                       "hpctrain: warning: ckpt merge --dtype %s: %zu tensor(s) are not floating point and were kept "
                       "as they are: %s\n",
                       opts->dtype.c_str(), r.kept.size(), list.c_str());
        }
        std::printf("wrote %s (%s, %zu tensors)\n", out->c_str(), r.format.c_str(), r.tensors);
      });
    };
  });
}

CommandRegistrar reg(60, add);

}  // namespace
}  // namespace hpctrain
