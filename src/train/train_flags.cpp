// One CLI11 option per config field, typed and with its default in --help; the raw strings
// go to load_config, which parses and validates them like TOML values.
#include "train/train_flags.h"

#include "runtime/check.h"
#include "runtime/world.h"
#include "train/command_line.h"
#include "train/config.h"

namespace hpctrain {

void add_train_flags(CLI::App& app, const std::shared_ptr<TrainFlags>& args) {
  app.add_option("--config", args->config, "TOML file; flags override its keys")->type_name("FILE");
  for (const auto& f : config_fields()) {
    const std::string flag = flag_of(f.key);
    std::string key = f.key;
    if (f.kind == FieldKind::kStringList) {
      // Repeatable: every occurrence's value (each may itself be comma-separated) reaches the
      // callback at once, joined with commas for load_config.
      app.add_option_function<std::vector<std::string>>(
             flag,
             [args, key](const std::vector<std::string>& vs) {
               std::string joined;
               for (const auto& v : vs) joined += (joined.empty() ? "" : ",") + v;
               args->raw[key] = joined;
             },
             f.help)
          ->type_name(f.label)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
          ->allow_extra_args(false);  // one value per occurrence: --model-lib a.so --model-lib b.so
      continue;
    }
    auto* opt = app.add_option_function<std::string>(
        flag, [args, key](const std::string& v) { args->raw[key] = v; },
        f.help + (f.kind == FieldKind::kBool ? " (alone: true)" : ""));
    if (f.kind == FieldKind::kBool) {
      // --sync-bn alone means true (CLI11 hands an option given without a value its default_str,
      // so that stays empty and the default is shown in the type name), --sync-bn false/=false too.
      opt->expected(0, 1)->default_str("")->type_name("[BOOL]=" + f.default_text);
    } else {
      opt->type_name(f.label);
      if (!f.default_text.empty()) opt->default_str(f.default_text);
    }
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
