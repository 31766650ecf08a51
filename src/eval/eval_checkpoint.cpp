// evaluate_checkpoint: reads the checkpoint, opens the test set and rebuilds the model inside
// agree_on_failure (every rank reads the same inputs; a bad one is reported once), then runs
// evaluate(). The factory: the caller's, --model, the checkpoint's TorchScript module, or the
// registry.
#include "eval/eval_checkpoint.h"

#include <chrono>
#include <filesystem>
#include <memory>

#include "ckpt/checkpoint.h"
#include "comm/open_run.h"
#include "dataset/data_source.h"
#include "dataset/loader.h"
#include "dataset/token_source.h"
#include "dataset/nanogpt_bin.h"
#include "runtime/agree.h"
#include "runtime/check.h"
#include "runtime/device.h"
#include "runtime/tensor_text.h"
#include "runtime/world.h"
#include "eval/checkpoint_model.h"
#include "eval/evaluate.h"
#include "metrics/run_report.h"
#include "optim/loss.h"

namespace hpctrain {
nlohmann::json evaluate_checkpoint(World& w, const EvalRequest& req, ModelFactory factory) {
  auto t0 = std::chrono::steady_clock::now();
  RunContext run = open_run(w, req.device);
  const DeviceChoice& dev = run.dev;
  const c10::Device device = run.device;
  DeviceRouter& comm = *run.comm;
  LoaderOptions lo;
  lo.batch_size = req.batch_size;
  lo.shuffle = false;
  lo.device = device;
  // Every rank reads the same data file and checkpoint: a bad one is reported once (rank 0).
  std::unique_ptr<Loader> loader;
  ModelPtr model;
  std::unique_ptr<Loss> loss;
  CheckpointState st;
  agree_on_failure(w.mpi_comm(), [&] {
    st = read_checkpoint(req.ckpt, device);
    std::string loss_name = "cross_entropy", targets_key = "targets";
    if (st.meta.contains("config")) {
      loss_name = st.meta["config"].value("loss", loss_name);
      targets_key = st.meta["config"].value("targets_key", targets_key);
    }
    lo.regression = Loss::regression(loss_name);
    if (lo.regression) lo.labels = targets_key;
    lo.seq_len = st.meta.value("seq_len", int64_t{0});
    // Token data or not is the checkpoint's to say (eval takes no --seq-len): a mismatch named here.
    const std::vector<std::string> files = split_files(req.data, "test");
    const std::string model_name = st.meta.value("model", std::string("?"));
    if (lo.seq_len <= 0 && is_token_file(files.at(0)))
      throw CollectiveError(files[0] + " holds a token stream, but the checkpoint's model " + model_name +
                            " was not trained on token data (no seq_len in " + req.ckpt + "'s metadata)");
    if (is_nanogpt_bin(files.at(0))) lo.vocab_size = st.meta.value("vocab_size", int64_t{0});
    if (lo.seq_len > 0 && std::filesystem::exists(files.at(0)) && !is_token_file(files[0]) && !is_nanogpt_bin(files[0]))
      throw CollectiveError("the checkpoint's language model " + model_name +
                            " was trained on token windows (seq_len " + std::to_string(lo.seq_len) + "), but " +
                            files[0] + " has no 'tokens' dataset: evaluate it on token data (data/README.md)");
    loader = std::make_unique<Loader>(files, w.size(), w.rank(), lo);
    if (!st.meta.contains("model"))
      throw CollectiveError(req.ckpt + " has no model name in its metadata (not written by hpctrain train)");
    const auto& info = loader->info();
    ModelSpec spec = checkpoint_model_spec(st, req.ckpt);
    if (!st.meta.contains("sample_shape")) spec.sample_shape = info.sample_shape;
    if (!st.meta.contains("num_classes")) spec.num_classes = info.num_classes;
    if (!st.meta.contains("target_shape")) spec.target_shape = info.target_shape;
    spec.device = device;
    if (spec.sample_shape != info.sample_shape)
      throw CollectiveError("the checkpoint's model takes samples of shape " + shape_string(spec.sample_shape) +
                            " but the test set in " + req.data + " has " + shape_string(info.sample_shape));
    if (info.tokens && info.vocab_size != spec.vocab_size)
      throw CollectiveError("the checkpoint's language model has vocab_size " + std::to_string(spec.vocab_size) +
                            " but the test set in " + req.data + " has " + std::to_string(info.vocab_size));
    model = untie_names((factory ? factory : checkpoint_model_factory(st, req.ckpt, req.model, req.model_lib))(spec));
    if (!model) throw CollectiveError("model " + spec.name + ": its factory returned no model");
    model->to(device);
    load_model_state(st, state_dict_names(*model), "checkpoint " + req.ckpt);
    loss = std::make_unique<Loss>(loss_name, spec.num_classes);
  });
  EvalResult r = evaluate(
      *model, [&](const at::Tensor& x) { return model->forward(x); }, *loss, *loader, comm);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json out = {{"world_size", w.size()},
                        {"device", dev.cuda ? "cuda" : "cpu"},
                        {"ckpt", req.ckpt},
                        {"model", st.meta["model"]},
                        {"step", st.meta.value("step", int64_t{-1})},
                        {"test_loss", r.loss},
                        {"test_accuracy", r.accuracy},
                        {"samples", r.samples},
                        {"wall_s", wall}};
  add_token_metrics(out, r.loss, loader->info());  // metrics/run_report.h
  return out;
}

}  // namespace hpctrain
