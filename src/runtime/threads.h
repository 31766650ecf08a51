// Compute threads per rank. Ranks share a node's cores: unless the user chose (OMP_NUM_THREADS
// or HPCTRAIN_THREADS), each rank takes cores / local ranks (at least 1), so N ranks on N cores
// never oversubscribe through LibTorch's intra-op pool. Returns the count set.
#pragma once

namespace hpctrain {
class World;
int configure_compute_threads(const World& world);
// Background threads that must only use idle CPU time (snapshot writer, snapshot copies): the
// calling thread's nice value set to `nice` (19: the lowest priority; Linux: per thread;
// elsewhere a no-op). Never throws.
void lower_this_thread_priority(int nice = 19);
}  // namespace hpctrain
