// World: MPI_Init_thread at MPI_THREAD_MULTIPLE (or adopting an initialized MPI), a private
// duplicate of MPI_COMM_WORLD, and the topology from MPI_Comm_split_type(SHARED). Also
// throw_mpi_error, which HPC_MPI_CHECK calls.
#include "runtime/world.h"
#include "runtime/versions.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "runtime/check.h"

namespace hpctrain {

void throw_mpi_error(int code, const char* call, const char* file, int line) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, msg, &len);
  int rank = -1, inited = 0;
  MPI_Initialized(&inited);
  if (inited) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw CommError("rank " + std::to_string(rank) + ": MPI call " + call + " failed at " + file + ":" +
              std::to_string(line) + ": " + std::string(msg, len));
}

namespace {
World* g_world = nullptr;

void finalize_at_exit() {
  if (g_world) g_world->finalize();
}
// Open MPI's settings that hpctrain changes from Open MPI's defaults, each only when the user has
// not set it (a launcher's --mca or OMPI_MCA_* wins; every rank gets the same default):
// - btl_tcp_links 2: two TCP connections per pair of ranks. With one, Open MPI's TCP transport
//   moved an exchange in both directions (MPI_Sendrecv, every allreduce) at 0.48 of a 1 Gbit/s
//   link each way, where iperf3 reaches 0.95 both ways; with two, 0.95 (a 16 MiB allreduce across
//   2 hosts: 0.49 -> 0.94 of the link limit; perf/README.md "Across hosts"). Harmless on
//   transports other than TCP (the BTL is not used).
void default_mpi_settings() { setenv("OMPI_MCA_btl_tcp_links", "2", /*overwrite=*/0); }
}  // namespace

bool World::initialized() { return g_world != nullptr; }

World& World::get() {
  if (!g_world) throw Error("hpctrain::World::get() called before World::init()");
  return *g_world;
}

World& World::init(int* argc, char*** argv) {
  if (g_world) return *g_world;
  auto* w = new World();
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    default_mpi_settings();
    HPC_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &w->thread_level_));
    w->owns_mpi_ = true;
  } else {
    HPC_MPI_CHECK(MPI_Query_thread(&w->thread_level_));
  }
  g_world = w;
  std::atexit(finalize_at_exit);
  // The rank first: the guard prints a CollectiveError on rank 0 only, so even the error
  // below must know which rank this is (else every rank prints it as "rank 0").
  HPC_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &w->rank_));
  HPC_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &w->size_));
  if (w->thread_level_ < MPI_THREAD_MULTIPLE) {
    throw CollectiveError("the MPI library granted thread level " + std::to_string(w->thread_level_) +
                          " but hpctrain's communication thread needs MPI_THREAD_MULTIPLE (" +
                          std::to_string(MPI_THREAD_MULTIPLE) + "); use an MPI built with thread support");
  }
  HPC_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &w->comm_));
  HPC_MPI_CHECK(MPI_Comm_rank(w->comm_, &w->rank_));
  HPC_MPI_CHECK(MPI_Comm_size(w->comm_, &w->size_));
  w->compute_topology();
  return *w;
}

void World::compute_topology() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  hostname_ = host;
  // Node-local communicator: ranks that share memory are on one node.
  MPI_Comm local;
  HPC_MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
  HPC_MPI_CHECK(MPI_Comm_rank(local, &local_rank_));
  HPC_MPI_CHECK(MPI_Comm_size(local, &local_size_));
  HPC_MPI_CHECK(MPI_Comm_free(&local));
  // Node count: the number of local-rank-0 processes.
  int leader = local_rank_ == 0 ? 1 : 0;
  HPC_MPI_CHECK(MPI_Allreduce(&leader, &node_count_, 1, MPI_INT, MPI_SUM, comm_));
}

std::string World::mpi_library_version() const { return hpctrain::mpi_library_version(); }

void World::finalize() {
  if (finalized_) return;
  finalized_ = true;
  int fin = 0;
  MPI_Finalized(&fin);
  if (fin) return;
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  if (owns_mpi_) MPI_Finalize();
}

void World::abort(int code) const {
  std::fflush(stdout);
  std::fflush(stderr);
  // Give the launcher a moment to forward our own error line, so that it comes before
  // MPI_Abort's banner (which travels on a different channel) and is the first line to read.
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace hpctrain
