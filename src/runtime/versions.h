// The versions of hpctrain and the libraries it runs on, spelled one way for the whole project:
// checkpoints store them (ckpt/manifest.h adds HDF5's), `hpctrain doctor` prints them.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace hpctrain {

// The MPI library's version: the first line (up to a comma) of MPI_Get_library_version, e.g.
// "Open MPI v4.1.4". Callable before MPI_Init.
std::string mpi_library_version();

// {"hpctrain": "0.1.0", "libtorch": "2.15.0", "mpi": "Open MPI v4.1.4"}.
nlohmann::json library_versions();

}  // namespace hpctrain
