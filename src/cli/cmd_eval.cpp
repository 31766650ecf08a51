// `hpctrain eval --ckpt PATH --data DIR [--device D] [--model-lib LIB]`: evaluates a checkpoint
// (a step directory, a checkpoint root, or a merged .h5 or .pt; saved from any device) on any
// world size, through the library's evaluate_checkpoint (eval/eval_checkpoint.h). The last
// stdout line of rank 0 is one JSON object.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "runtime/world.h"
#include "eval/eval_checkpoint.h"

namespace hpctrain {
namespace {

int eval(World& w, const EvalRequest& req) {
  nlohmann::json j = evaluate_checkpoint(w, req);
  if (w.rank() == 0) {
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}

void add(CLI::App& root, Action& chosen) {
  auto* cmd = root.add_subcommand("eval", "evaluate a checkpoint on the test set");
  auto a = std::make_shared<EvalRequest>();
  cmd->add_option("--ckpt", a->ckpt, "checkpoint step dir, root, ROOT/latest, or merged .h5 / .pt / .safetensors")
      ->required()
      ->type_name("PATH");
  cmd->add_option("--data", a->data, "directory with test.h5")->required()->type_name("DIR");
  cmd->add_option("--device", a->device, "device to evaluate on")->type_name("auto|cpu|cuda|cuda:N");
  cmd->add_option("--batch-size", a->batch_size, "per-rank batch")->check(CLI::PositiveNumber)->type_name("INT");
  cmd->add_option("--model", a->model, "model to load the weights into (default: the checkpoint's own)")
      ->type_name("NAME|FILE.pt");
  cmd->add_option("--model-lib", a->model_lib, "model plugin LIB.so the checkpoint's model comes from (repeatable)")
      ->type_name("PATH");
  cmd->callback([&chosen, a] { chosen = [a](World& w) { return eval(w, *a); }; });
}

CommandRegistrar reg(50, add);

}  // namespace
}  // namespace hpctrain
