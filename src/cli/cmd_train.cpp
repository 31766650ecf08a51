// `hpctrain train [--config FILE.toml] [flags]`: every flag mirrors a config key
// (train/config.h), so flags and the TOML file can never disagree about names or types.
#include <cstdio>
#include <map>
#include <memory>

#include "cli/commands.h"
#include "runtime/world.h"
#include "train/config.h"
#include "train/preempt.h"
#include "train/trainer.h"

namespace hpctrain {
namespace {

struct TrainArgs {
  std::string config;
  std::map<std::string, std::string> raw;  // key -> flag value as typed
};

int train(World& w, const TrainArgs& a) {
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
  auto args = std::make_shared<TrainArgs>();
  cmd->add_option("--config", args->config, "TOML file; flags override its keys");
  for (const auto& f : config_fields()) {
    std::string flag = "--" + f.key;
    for (auto& c : flag)
      if (c == '_') c = '-';
    std::string key = f.key;
    if (f.kind == FieldKind::kBool) {
      // --sync-bn alone means true; --sync-bn=false is accepted too.
      cmd->add_option_function<std::string>(flag, [args, key](const std::string& v) { args->raw[key] = v; },
                                            f.help)
          ->expected(0, 1)
          ->default_str("");
    } else {
      cmd->add_option_function<std::string>(flag, [args, key](const std::string& v) { args->raw[key] = v; },
                                            f.help);
    }
  }
  cmd->callback([&chosen, args] { chosen = [args](World& w) { return train(w, *args); }; });
}

CommandRegistrar reg(40, add);

}  // namespace
}  // namespace hpctrain
