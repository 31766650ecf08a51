// Compute threads per rank. Ranks share a node's cores: unless the user chose (OMP_NUM_THREADS
// or HPCTRAIN_THREADS), each rank takes cores / local ranks (at least 1), so N ranks on N cores
// never oversubscribe through LibTorch's intra-op pool. Returns the count set.
#pragma once

namespace hpctrain {
class World;
int configure_compute_threads(const World& world);
}  // namespace hpctrain
