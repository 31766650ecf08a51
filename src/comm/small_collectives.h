// Small collectives over a Communicator, written once: one string from every rank (error
// messages, parameter lists, host reports, trace events; the bytes travel as a uint8 tensor
// through Communicator::allgather), and one count summed over ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain {

class Communicator;

// Collective on `comm` (which must carry CPU tensors): every rank's `mine`, indexed by rank.
// Strings may differ in length and be empty. `tag` names the collective in watchdog reports.
std::vector<std::string> allgather_strings(Communicator& comm, const std::string& mine, const std::string& tag);

// Collective on `comm` (CPU tensors): the sum of every rank's `mine`.
int64_t sum_over_ranks(Communicator& comm, int64_t mine, const std::string& tag);

}  // namespace hpctrain
