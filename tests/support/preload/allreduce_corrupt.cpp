// LD_PRELOAD shim for test_bench.sh (test harness, not the library): MPI_Allreduce runs the real
// one, then on rank 0 of the communicator adds 1 to the first element of a float32 result of two
// or more elements, as a broken network or MPI library would. Other datatypes and single-element
// calls (timings, counts, flags) are left alone, so that `hpctrain bench` can still report what
// it found. Only a process started with the shim preloaded is affected.
#include <dlfcn.h>
#include <mpi.h>

extern "C" int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm) {
  using Fn = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "MPI_Allreduce"));
  int rc = real(sendbuf, recvbuf, count, datatype, op, comm);
  int rank = -1;
  if (rc == MPI_SUCCESS && datatype == MPI_FLOAT && count >= 2 && MPI_Comm_rank(comm, &rank) == MPI_SUCCESS &&
      rank == 0)
    static_cast<float*>(recvbuf)[0] += 1.0f;
  return rc;
}
