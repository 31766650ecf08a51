#include "runtime/threads.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

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

void lower_this_thread_priority(int nice) {
#if defined(__linux__)
  // On Linux a nice value is per thread (the tid is a process id for setpriority).
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice);
#endif
}

}  // namespace hpctrain
