// LD_PRELOAD shim for the bad-input battery (test harness, not the library): MPI_Init_thread
// runs the real one, then reports PRELOAD_MPI_THREAD_LEVEL as the provided level, so that the
// library's check of the granted thread level can be seen to fire with a real Open MPI (which
// always grants MPI_THREAD_MULTIPLE). Without the variable it changes nothing.
#include <dlfcn.h>
#include <mpi.h>

#include <cstdlib>

extern "C" int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  using Fn = int (*)(int*, char***, int, int*);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "MPI_Init_thread"));
  int rc = real(argc, argv, required, provided);
  if (const char* lvl = std::getenv("PRELOAD_MPI_THREAD_LEVEL"); lvl && rc == MPI_SUCCESS) *provided = std::atoi(lvl);
  return rc;
}
