// World: the process's place in the MPI job. Created once per process.
//
// Contract:
// - World::init() calls MPI_Init_thread asking for MPI_THREAD_MULTIPLE and throws if the MPI
//   library grants less (the comm thread needs it). If MPI is already initialized (a test
//   harness did it), it adopts that state.
// - Rank and local rank come from MPI itself (never SLURM_*): under mpirun inside an sbatch
//   allocation every process inherits SLURM_PROCID=0.
// - Works under mpirun, srun --mpi=pmix and as a singleton (a world of 1).
// - Before MPI_Init it sets OMPI_MCA_btl_tcp_links=2 unless the environment already sets it
//   (Open MPI over TCP moves data both ways at once at half the link rate with one connection).
// - finalize() is idempotent; abort() ends every rank of the job.
// The runtime/ stage among the others, its threads and locks: docs/architecture.md.
#pragma once

#include <mpi.h>

#include <string>

namespace hpctrain {

class World {
 public:
  // Initializes MPI (once) and computes the topology. Safe to call again: returns the same World.
  static World& init(int* argc, char*** argv);
  // The World after init(); throws if init() was not called.
  static World& get();
  static bool initialized();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  int node_count() const { return node_count_; }
  const std::string& hostname() const { return hostname_; }
  // A private duplicate of MPI_COMM_WORLD for runtime-level collectives (topology, agreement).
  MPI_Comm mpi_comm() const { return comm_; }
  // The thread level MPI granted.
  int thread_level() const { return thread_level_; }
  // Version string of the MPI library (MPI_Get_library_version, first line).
  std::string mpi_library_version() const;

  // Ends MPI cleanly. Idempotent. Called automatically at exit if still initialized.
  void finalize();
  // Prints nothing itself; ends every rank of the job with `code` (MPI_Abort).
  [[noreturn]] void abort(int code) const;

 private:
  World() = default;
  void compute_topology();

  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, node_count_ = 1;
  int thread_level_ = 0;
  bool owns_mpi_ = false, finalized_ = false;
  std::string hostname_;
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace hpctrain
