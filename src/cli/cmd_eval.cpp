// `hpctrain eval --ckpt PATH --data DIR [--device D]`: evaluates a checkpoint (a step directory,
// a checkpoint root, or a merged .h5 or .pt; saved from any device) on any world size. The model is
// rebuilt from the checkpoint's own metadata; the last stdout line of rank 0 is one JSON object.
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "cli/commands.h"
#include "comm/router.h"
#include "dataset/loader.h"
#include "ddp/ddp.h"
#include "runtime/agree.h"
#include "runtime/check.h"
#include "runtime/device.h"
#include "runtime/world.h"
#include "train/evaluate.h"
#include "train/models.h"
#include "train/train_state.h"

namespace hpctrain {
namespace {

struct EvalArgs {
  std::string ckpt, data, device = "auto";
  int64_t batch_size = 256;
};

int eval(World& w, const EvalArgs& a) {
  auto t0 = std::chrono::steady_clock::now();
  DeviceChoice dev = choose_device(a.device, w.local_rank(), w.local_size(), visible_cuda_devices());
  activate_device(dev);
  c10::Device device = dev.cuda ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(dev.index))
                                : c10::Device(c10::kCPU);
  DeviceRouter comm(w.comm(), dev.cuda ? dev.index : -1);
  LoaderOptions lo;
  lo.batch_size = a.batch_size;
  lo.shuffle = false;
  lo.device = device;
  // Every rank reads the same data file and checkpoint: a bad one is reported once (rank 0).
  std::unique_ptr<Loader> loader;
  ClassifierNet model{nullptr};
  CheckpointState st;
  agree_on_failure(w.comm(), [&] {
    loader = std::make_unique<Loader>(a.data + "/test.h5", w.size(), w.rank(), lo);
    st = read_checkpoint(a.ckpt, device);
    if (!st.meta.contains("model"))
      throw CollectiveError(a.ckpt + " has no model name in its metadata (not written by hpctrain train)");
    std::vector<int64_t> shape = st.meta.value("sample_shape", loader->info().sample_shape);
    int64_t classes = st.meta.value("num_classes", loader->info().num_classes);
    if (shape != loader->info().sample_shape)
      throw CollectiveError("the checkpoint's model takes samples of shape " + shape_string(shape) +
                            " but " + a.data + "/test.h5 has " + shape_string(loader->info().sample_shape));
    model = make_model(st.meta["model"].get<std::string>(), shape, classes);
    model->to(device);
    load_model_state(st, *model, "checkpoint " + a.ckpt);
  });
  Loader& test = *loader;
  EvalResult r = evaluate(*model, [&](const at::Tensor& x) { return model->forward(x); }, test, comm);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (w.rank() == 0) {
    nlohmann::json j = {{"world_size", w.size()}, {"device", dev.cuda ? "cuda" : "cpu"},
                        {"ckpt", a.ckpt}, {"model", st.meta["model"]},
                        {"step", st.meta.value("step", int64_t{-1})}, {"test_loss", r.loss},
                        {"test_accuracy", r.accuracy}, {"samples", r.samples}, {"wall_s", wall}};
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}

void add(CLI::App& root, Action& chosen) {
  auto* cmd = root.add_subcommand("eval", "evaluate a checkpoint on the test set");
  auto a = std::make_shared<EvalArgs>();
  cmd->add_option("--ckpt", a->ckpt, "checkpoint step dir, root, ROOT/latest, or merged .h5 / .pt / .safetensors")->required();
  cmd->add_option("--data", a->data, "directory with test.h5")->required();
  cmd->add_option("--device", a->device, "auto|cpu|cuda|cuda:N")->capture_default_str();
  cmd->add_option("--batch-size", a->batch_size, "per-rank batch")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->callback([&chosen, a] { chosen = [a](World& w) { return eval(w, *a); }; });
}

CommandRegistrar reg(50, add);

}  // namespace
}  // namespace hpctrain
