// Config's one source of truth: every field round-trips through its flag, its TOML key and its
// JSON key; precedence is flags > TOML > env > defaults; --help shows types and defaults; option
// pairings fail when the config is loaded.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runtime/check.h"
#include "train/config.h"
#include "train/train_flags.h"
#include "unit/train/temp_toml.h"

using namespace hpctrain;
using json = nlohmann::json;

namespace {

// A value of the field other than its default, inside its range and choices.
json other_value(const FieldSpec& f, const json& def) {
  switch (f.kind) {
    case FieldKind::kInt: {
      int64_t v = def.get<int64_t>() + 1;
      return json(v <= f.max ? v : static_cast<int64_t>(f.min));
    }
    case FieldKind::kFloat: {
      double v = def.get<double>() + 0.25;
      return json(v <= f.max ? v : (def.get<double>() + std::max(f.min, 0.0)) / 2);
    }
    case FieldKind::kBool: return json(!def.get<bool>());
    case FieldKind::kString:
      for (const auto& c : f.choices)
        if (!c.empty() && c != def.get<std::string>()) return json(c);
      return json("x_" + f.key);
    case FieldKind::kStringList: return json::array({"a_" + f.key + ".so", "b_" + f.key + ".so"});
  }
  return json();
}

std::string flag(const std::string& key) {
  std::string f = "--" + key;
  for (auto& c : f)
    if (c == '_') c = '-';
  return f;
}

std::string as_flag_value(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string as_toml(const std::string& key, const json& v) {
  if (v.is_array()) {
    std::string s = key + " = [";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i].dump();
    return s + "]\n";
  }
  return key + " = " + v.dump() + "\n";  // JSON strings, numbers and booleans are TOML too
}

// Parses a `hpctrain train` command line the way the CLI does, then loads the config.
TrainConfig from_command_line(std::vector<std::string> args) {
  CLI::App app{"test"};
  auto flags = std::make_shared<TrainFlags>();
  add_train_flags(app, flags);
  std::vector<const char*> argv{"train"};
  for (auto& a : args) argv.push_back(a.c_str());
  std::vector<std::string> rev(argv.rbegin(), argv.rend() - 1);
  app.parse(rev);
  return load_config(flags->config, flags->raw);
}

struct EnvVar {
  std::string name;
  EnvVar(std::string n, const std::string& v) : name(std::move(n)) { setenv(name.c_str(), v.c_str(), 1); }
  ~EnvVar() { unsetenv(name.c_str()); }
};

}  // namespace

TEST(ConfigFields, EveryFieldHasOneJsonKeyAndOneSpec) {
  json j = TrainConfig().to_json();
  std::set<std::string> spec_keys;
  for (const auto& f : config_fields()) spec_keys.insert(f.key);
  std::set<std::string> json_keys;
  for (auto it = j.begin(); it != j.end(); ++it) json_keys.insert(it.key());
  EXPECT_EQ(spec_keys, json_keys);
  EXPECT_EQ(spec_keys.size(), config_fields().size()) << "a key listed twice";
}

TEST(ConfigFields, EveryFieldRoundTripsThroughItsFlagTomlKeyAndJsonKey) {
  const json defaults = TrainConfig().to_json();
  for (const auto& f : config_fields()) {
    SCOPED_TRACE(f.key);
    const json want = other_value(f, defaults[f.key]);
    ASSERT_NE(want, defaults[f.key]);
    std::vector<std::string> args;
    if (f.key != "data") args = {"--data", "/d"};
    if (want.is_array()) {
      for (const auto& v : want) args.insert(args.end(), {flag(f.key), v.get<std::string>()});
    } else {
      args.insert(args.end(), {flag(f.key), as_flag_value(want)});
    }
    TrainConfig by_flag = from_command_line(args);
    EXPECT_EQ(by_flag.to_json()[f.key], want) << "flag " << flag(f.key);

    std::string toml = as_toml(f.key, want) + (f.key == "data" ? "" : "data = \"/d\"\n");
    TrainConfig by_toml = load_config(write_toml(toml), {});
    EXPECT_EQ(by_toml.to_json()[f.key], want) << "TOML " << toml;

    json j = defaults;
    j[f.key] = want;
    EXPECT_EQ(TrainConfig::from_json(j).to_json(), j) << "JSON key " << f.key;
    EXPECT_EQ(TrainConfig::from_json(by_flag.to_json()).to_json(), by_flag.to_json());
  }
}

TEST(ConfigFields, BooleanFlagsAloneMeanTrueAndTakeTrueOrFalse) {
  EXPECT_TRUE(from_command_line({"--data", "/d", "--sync-bn"}).sync_bn);
  EXPECT_FALSE(from_command_line({"--data", "/d", "--ckpt-async", "false"}).ckpt_async);
  EXPECT_FALSE(from_command_line({"--data", "/d", "--ckpt-async=false"}).ckpt_async);
  EXPECT_TRUE(from_command_line({"--data", "/d", "--augment", "true"}).augment);
}

TEST(ConfigPrecedence, FlagsOverTomlOverEnvironmentOverDefaults) {
  const std::string toml = write_toml("data = \"/d\"\ncollective_timeout = 300\ndebug_collectives = false\n");
  const std::string plain = write_toml("data = \"/d\"\n");
  EXPECT_EQ(load_config(plain, {}).collective_timeout, 300);  // the default
  {
    EnvVar t("HPCTRAIN_COLLECTIVE_TIMEOUT", "7");
    EnvVar d("HPCTRAIN_DEBUG_COLLECTIVES", "1");
    TrainConfig env = load_config(plain, {});
    EXPECT_EQ(env.collective_timeout, 7) << "env over defaults";
    EXPECT_TRUE(env.debug_collectives) << "env over defaults";
    // The file's values win over the environment, even where they equal the defaults.
    TrainConfig file = load_config(toml, {});
    EXPECT_EQ(file.collective_timeout, 300) << "TOML over env";
    EXPECT_FALSE(file.debug_collectives) << "TOML over env";
    // A flag wins over both, also when it repeats the default.
    TrainConfig flags =
        from_command_line({"--config", plain, "--collective-timeout", "300", "--debug-collectives", "false"});
    EXPECT_EQ(flags.collective_timeout, 300) << "flag over env";
    EXPECT_FALSE(flags.debug_collectives) << "flag over env";
    TrainConfig flag_over_toml = from_command_line({"--config", toml, "--collective-timeout", "20"});
    EXPECT_EQ(flag_over_toml.collective_timeout, 20) << "flag over TOML";
    // What the communicators get is what the config says.
    CommSettings cs = comm_settings(flags);
    EXPECT_EQ(cs.collective_timeout_s, 300);
    EXPECT_FALSE(cs.debug_collectives);
    EXPECT_EQ(comm_settings(env).collective_timeout_s, 7);
    EXPECT_TRUE(comm_settings(env).debug_collectives);
  }
  // Zero turns the watchdog off, from the flag as from the environment.
  EXPECT_EQ(from_command_line({"--data", "/d", "--collective-timeout", "0"}).collective_timeout, 0);
  EnvVar off("HPCTRAIN_COLLECTIVE_TIMEOUT", "0");
  EXPECT_EQ(load_config(plain, {}).collective_timeout, 0);
}

TEST(ConfigHelp, EveryOptionShowsItsTypeAndDefault) {
  CLI::App app{"test"};
  auto flags = std::make_shared<TrainFlags>();
  add_train_flags(app, flags);
  const std::string help = app.help();
  for (const char* want :
       {"--batch-size INT=64", "--lr FLOAT=0.05", "--optimizer {sgd,adamw}=sgd", "--sync-bn [BOOL]=false",
        "--ckpt-async [BOOL]=true", "--data DIR", "--resume auto|none|PATH=auto", "--config FILE", "--model-lib PATH"})
    EXPECT_NE(help.find(want), std::string::npos) << want << " not in\n" << help;
  EXPECT_EQ(help.find(" TEXT"), std::string::npos) << help;
}

TEST(ConfigPairings, AreCheckedWhenTheConfigIsLoaded) {
  const std::string script = "/tmp/hpctrain_config_fields_test_" + std::to_string(getpid()) + ".pt";
  std::ofstream(script) << "not read at load time";
  try {
    load_config("", {{"data", "/d"}, {"model", script}, {"sync_bn", "true"}});
    ADD_FAILURE() << "--sync-bn with a TorchScript model was accepted";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("--sync-bn"), std::string::npos) << e.what();
  }
  std::remove(script.c_str());
  EXPECT_NO_THROW(load_config("", {{"data", "/d"}, {"zero", "3"}, {"optimizer", "adamw"}}));
  EXPECT_NO_THROW(load_config("", {{"data", "/d"}, {"zero", "2"}, {"optimizer", "adamw"}}));
  TrainConfig c;
  c.data = "/d";
  c.zero = 1;
  c.optimizer = "lamb";  // a config built in code, past the choices check
  EXPECT_THROW(check_pairings(c), CollectiveError);
  c.optimizer = "adamw";
  EXPECT_NO_THROW(check_pairings(c));
  c.zero = 2;
  c.optimizer = "lamb";
  EXPECT_THROW(check_pairings(c), CollectiveError);
  c.zero = 3;
  EXPECT_THROW(check_pairings(c), CollectiveError);
}
