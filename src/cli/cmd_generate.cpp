// `hpctrain generate --ckpt CK --prompt TEXT --max-new-tokens N [--temperature T] [--top-k K]
// [--seed S] [--prompt-tokens 1,2,3] [--json]`: text from a language-model checkpoint
// (eval/generate.h), computed on rank 0. Prints the prompt followed by the sampled text, decoded
// with the checkpoint's tokenizer (bytes or SentencePiece), or the ids when the checkpoint has no
// tokenizer to decode with; --json prints one JSON object instead.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "runtime/agree.h"
#include "runtime/world.h"
#include "eval/generate.h"

namespace hpctrain {
namespace {

struct Args {
  GenerateRequest req;
  bool json = false;
};

int run(World& w, const Args& a) {
  run_on_rank0(w.mpi_comm(), "generate", [&] {
    GenerateResult r = generate(a.req);
    if (a.json) {
      nlohmann::json j = {{"ckpt", a.req.ckpt},       {"prompt_tokens", r.prompt},  {"tokens", r.generated},
                          {"tokenizer", r.tokenizer}, {"block_size", r.block_size}, {"temperature", a.req.temperature},
                          {"top_k", a.req.top_k},     {"seed", a.req.seed},         {"seconds", r.seconds}};
      if (r.codec) j["text"] = r.text();  // invalid UTF-8 is replaced when dumped
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else if (r.codec) {
      std::string t = r.text();
      std::fwrite(t.data(), 1, t.size(), stdout);
      std::fputc('\n', stdout);
    } else {
      std::string s;
      for (int64_t t : r.prompt) s += (s.empty() ? "" : ",") + std::to_string(t);
      s += " |";
      for (int64_t t : r.generated) s += " " + std::to_string(t);
      std::printf("%s\n", s.c_str());
    }
    std::fflush(stdout);
  });
  return 0;
}

void add(CLI::App& root, Action& chosen) {
  auto* cmd = root.add_subcommand("generate", "sample text from a language-model checkpoint");
  auto a = std::make_shared<Args>();
  GenerateRequest& r = a->req;
  cmd->add_option("--ckpt", r.ckpt, "checkpoint step dir, root, ROOT/latest, or merged .h5 / .pt / .safetensors")
      ->required()
      ->type_name("PATH");
  auto* text = cmd->add_option("--prompt", r.prompt, "prompt text, encoded with the checkpoint's tokenizer (bytes or SentencePiece)")->type_name("STRING");
  cmd->add_option("--prompt-tokens", r.prompt_tokens, "prompt as token ids, comma-separated (any tokenizer)")
      ->delimiter(',')
      ->type_name("ID,...")
      ->excludes(text);
  cmd->add_option("--max-new-tokens", r.max_new_tokens, "tokens to generate")
      ->check(CLI::NonNegativeNumber)
      ->type_name("INT");
  cmd->add_option("--temperature", r.temperature, "softmax temperature (0: greedy, deterministic)")
      ->check(CLI::NonNegativeNumber)
      ->type_name("FLOAT");
  cmd->add_option("--top-k", r.top_k, "sample from the K most likely tokens (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->type_name("INT");
  cmd->add_option("--seed", r.seed, "seed of the sampling generator")->type_name("INT");
  cmd->add_option("--device", r.device, "device to run on")->type_name("auto|cpu|cuda|cuda:N");
  cmd->add_option("--model", r.model, "model to load the weights into (default: the checkpoint's own)")
      ->type_name("NAME|FILE.pt");
  cmd->add_option("--model-lib", r.model_lib, "model plugin LIB.so the checkpoint's model comes from (repeatable)")
      ->type_name("PATH");
  cmd->add_flag("--json", a->json, "print one JSON object (ids, text, timing) instead of the text");
  cmd->callback([&chosen, a] { chosen = [a](World& w) { return run(w, *a); }; });
}

CommandRegistrar reg(55, add);

}  // namespace
}  // namespace hpctrain
