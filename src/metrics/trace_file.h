// Writes the run's Chrome trace: every rank's events gathered to rank 0, one JSON file with
// one process per rank. Collective.
#pragma once

#include <string>

namespace hpctrain {
class Communicator;
void write_trace(const std::string& path, Communicator& comm, int rank);
}  // namespace hpctrain
