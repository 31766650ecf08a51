// Which hpctrain build a process runs, and the check that every rank of a job runs the same one
// (on a cluster, a host with a stale clone or another install prefix is a classic).
//
// Contract:
// - build_id(): 16 hex digits, the xxh3-64 of this process's executable (/proc/self/exe) and of
//   the shared object that holds libhpctrain when it is a separate file. Computed once, local.
// - check_same_build(World&): collective over the world. Throws CollectiveError (every rank
//   throws the same) naming each host whose build differs from rank 0's, with its ranks:
//   "hosts run different hpctrain builds: node1 (ranks 2,3) has 9f..., node0 (rank 0) has 1c...;
//   rebuild or use the same path on every host". Passes silently otherwise.
#pragma once

#include <string>

namespace hpctrain {

class World;

std::string build_id();
void check_same_build(World& world);

}  // namespace hpctrain
