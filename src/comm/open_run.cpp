#include "comm/open_run.h"

#include "runtime/world.h"

namespace hpctrain {

RunContext open_run(World& world, const std::string& device_spec, const CommSettings& settings) {
  RunContext r;
  r.dev = choose_device(device_spec, world.local_rank(), world.local_size(), visible_cuda_devices());
  activate_device(r.dev);
  if (r.dev.cuda) r.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(r.dev.index));
  r.comm = std::make_unique<DeviceRouter>(world.mpi_comm(), r.dev.cuda ? r.dev.index : -1, settings);
  return r;
}

}  // namespace hpctrain
