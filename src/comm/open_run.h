// open_run: the start of every collective command (train, eval, doctor, programs of users):
// this rank's device, chosen and made current, and the communicator that routes each tensor to
// the backend of its device. One call, so the entry points cannot wire them differently.
#pragma once

#include <c10/core/Device.h>

#include <memory>
#include <string>

#include "comm/comm_settings.h"
#include "comm/router.h"
#include "runtime/device.h"

namespace hpctrain {

class World;

struct RunContext {
  DeviceChoice dev;                    // what --device resolved to on this rank
  c10::Device device{c10::kCPU};       // the same, as LibTorch names it
  std::unique_ptr<DeviceRouter> comm;  // CPU tensors over MPI, CUDA tensors over NCCL
};

// Collective on `world`: chooses this rank's device from `device_spec` (auto|cpu|cuda|cuda:N,
// runtime/device.h; a spec that cannot be met throws CollectiveError naming it), activates it
// before any CUDA or NCCL context exists, and builds the DeviceRouter with `settings`.
RunContext open_run(World& world, const std::string& device_spec,
                    const CommSettings& settings = CommSettings::from_env());

}  // namespace hpctrain
