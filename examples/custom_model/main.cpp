// custom_model: the whole hpctrain trainer (DDP, sampler, loader, checkpoints, resume,
// preemption, metrics, watchdog) for a model of our own.
//   mpirun -np 2 ./custom_model --data DIR --epochs 2 --ckpt-dir ck    (every `hpctrain train` flag)
//   mpirun -np 2 ./custom_model eval --ckpt ck --data DIR
#include <hpctrain/hpctrain.h>

#include <cstdio>
#include <string>

#include "res_gn_net.h"

namespace {

// Called on every rank with the data's shape; DDP broadcasts rank 0's initial weights.
hpctrain::ModelPtr make_res_gn_net(const hpctrain::ModelSpec& spec) {
  if (spec.sample_shape.size() != 3) throw hpctrain::CollectiveError("res_gn_net needs [C,H,W] samples");
  return hpctrain::module_model(ResGnNet(spec.sample_shape[0], spec.num_classes));
}

void print_on_rank0(const hpctrain::World& world, const nlohmann::json& j) {
  if (world.rank() != 0) return;
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

int eval(hpctrain::World& world, int argc, char** argv) {
  hpctrain::EvalRequest req;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--ckpt")
      req.ckpt = value;
    else if (flag == "--data")
      req.data = value;
    else if (flag == "--device")
      req.device = value;
    else
      throw hpctrain::CollectiveError("eval: unknown flag " + flag + " (--ckpt, --data, --device)");
  }
  if (req.ckpt.empty() || req.data.empty()) throw hpctrain::CollectiveError("eval needs --ckpt PATH --data DIR");
  print_on_rank0(world, hpctrain::evaluate_checkpoint(world, req, make_res_gn_net));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return hpctrain::run_guarded(argc, argv, [&](hpctrain::World& world) -> int {
    hpctrain::configure_compute_threads(world);
    if (argc > 1 && std::string(argv[1]) == "eval") return eval(world, argc, argv);
    auto cfg = hpctrain::parse_train_command_line(world, argc, argv, "custom_model: ResGnNet on hpctrain");
    if (!cfg) return 0;         // --help
    cfg->model = "res_gn_net";  // the name checkpoints and the summary record
    nlohmann::json summary = hpctrain::train(world, *cfg, make_res_gn_net);
    print_on_rank0(world, summary);
    return summary.value("preempted", false) ? hpctrain::kPreemptedExitCode : 0;
  });
}
