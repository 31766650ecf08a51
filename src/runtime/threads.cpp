#include "runtime/threads.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "runtime/world.h"

namespace hpctrain {

int configure_compute_threads(const World& world) {
  int n = 0;
  if (const char* t = std::getenv("HPCTRAIN_THREADS"))
    n = std::atoi(t);
  else if (const char* t = std::getenv("OMP_NUM_THREADS"))
    n = std::atoi(t);
  if (n <= 0) {
    int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    n = std::max(1, cores / std::max(1, world.local_size()));
  }
  at::set_num_threads(n);
  return n;
}

}  // namespace hpctrain
