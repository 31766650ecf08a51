#include "train/train_flags.h"

#include "runtime/check.h"
#include "runtime/world.h"
#include "train/command_line.h"
#include "train/config.h"

namespace hpctrain {

void add_train_flags(CLI::App& app, const std::shared_ptr<TrainFlags>& args) {
  app.add_option("--config", args->config, "TOML file; flags override its keys");
  for (const auto& f : config_fields()) {
    std::string flag = "--" + f.key;
    for (auto& c : flag)
      if (c == '_') c = '-';
    std::string key = f.key;
    auto* opt = app.add_option_function<std::string>(
        flag,
        [args, key, list = f.kind == FieldKind::kStringList](const std::string& v) {
          std::string& slot = args->raw[key];
          slot = list && !slot.empty() ? slot + "," + v : v;  // a repeated list flag appends
        },
        f.help);
    // --sync-bn alone means true; --sync-bn=false is accepted too.
    if (f.kind == FieldKind::kBool) opt->expected(0, 1)->default_str("");
    if (f.kind == FieldKind::kStringList) opt->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }
}

std::optional<TrainConfig> parse_train_command_line(World& world, int argc, const char* const* argv,
                                                    const std::string& description) {
  CLI::App app{description};
  auto flags = std::make_shared<TrainFlags>();
  add_train_flags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    if (world.rank() == 0) app.exit(e);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    throw CollectiveError(std::string(e.what()) + " (see " + (argc > 0 ? argv[0] : "the program") + " --help)");
  }
  return load_config(flags->config, flags->raw);
}

}  // namespace hpctrain
