// Trainer::State's --zero 3 set-up: the model's units handed to an FsdpEngine (model/sharded_model.h),
// refused in one line where it cannot work.
#include "model/sharded_model.h"
#include "runtime/agree.h"
#include "runtime/check.h"
#include "train/trainer_state_impl.h"

namespace hpctrain {

void Trainer::State::shard_parameters(at::ScalarType grad_comm_dtype) {
  agree_on_failure(world.mpi_comm(), [&] {
    if (!device.is_cpu())
      throw CollectiveError("--zero 3 runs on CPU ranks only (the NCCL path is not built); this run's device is " +
                            device.str() + ": pass --device cpu, or --zero 1");
  });
  FsdpOptions o;
  o.grad_comm_dtype = grad_comm_dtype;
  // --amp bf16: units gathered and computed in bf16 over the fp32 master shards (ddp/fsdp.h).
  if (cfg.amp == "bf16") o.param_dtype = at::kBFloat16;
  ShardedModel sm;
  agree_on_failure(world.mpi_comm(), [&] { sm = shard_model(model, *comm, o); });
  model = sm.model;
  fsdp = sm.engine;
}

}  // namespace hpctrain
