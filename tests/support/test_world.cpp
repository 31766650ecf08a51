#include "support/test_world.h"

#include <memory>

#include "runtime/device.h"

namespace hpctrain::testing {

World& world() { return World::get(); }

Communicator& cpu_comm() {
  static auto comm = std::make_unique<DeviceRouter>(world().mpi_comm(), -1);
  return *comm;
}

bool no_gpu() { return visible_cuda_devices() == 0; }

}  // namespace hpctrain::testing
