#include "runtime/versions.h"

#include <mpi.h>
#include <torch/version.h>

#include "hpctrain_version.h"

namespace hpctrain {

std::string mpi_library_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string s(buf, static_cast<size_t>(len));
  return s.substr(0, s.find_first_of(",\n"));
}

nlohmann::json library_versions() {
  return {{"hpctrain", HPCTRAIN_VERSION}, {"libtorch", TORCH_VERSION}, {"mpi", mpi_library_version()}};
}

}  // namespace hpctrain
