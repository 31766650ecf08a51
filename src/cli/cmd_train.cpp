// `hpctrain train [--config FILE.toml] [flags]`: every flag mirrors a config key
// (train/config.h, train/train_flags.h), so flags and the TOML file can never disagree.
#include <cstdio>
#include <map>
#include <memory>

#include "cli/commands.h"
#include "runtime/world.h"
#include "train/config.h"
#include "train/preempt.h"
#include "train/train_flags.h"
#include "train/trainer.h"

namespace hpctrain {
namespace {

int train(World& w, const TrainFlags& a) {
  TrainConfig cfg = load_config(a.config, a.raw);
  Trainer trainer(cfg, w);
  auto summary = trainer.run();
  if (w.rank() == 0) {
    std::printf("%s\n", summary.dump().c_str());
    std::fflush(stdout);
  }
  // A preempted run checkpointed and stops with the documented "try again" code.
  return summary.value("preempted", false) ? kPreemptedExitCode : 0;
}

void add(CLI::App& root, Action& chosen) {
  auto* cmd = root.add_subcommand("train", "train a model with DDP on every rank");
  auto args = std::make_shared<TrainFlags>();
  add_train_flags(*cmd, args);
  cmd->callback([&chosen, args] { chosen = [args](World& w) { return train(w, *args); }; });
}

CommandRegistrar reg(40, add);

}  // namespace
}  // namespace hpctrain
