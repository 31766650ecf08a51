// Desync detection (--debug-collectives): before a collective, every rank shares a fixed-size
// fingerprint of what it is about to call, and all ranks raise the same error on a mismatch.
//
// Contract:
// - The fingerprint holds op, dtype, element count, sequence number and caller tag (tags are
//   truncated to 95 characters). Element counts are not compared for allgather, whose
//   contributions may legitimately differ.
// - describe_desync() is pure and deterministic: given the same gathered fingerprints every
//   rank builds the same message, so the CollectiveError is identical everywhere and the CLI
//   prints it once.
#pragma once

#include <mpi.h>

#include <optional>
#include <string>
#include <vector>

#include "comm/op_info.h"

namespace hpctrain {

struct Fingerprint {
  uint64_t seq = 0;
  int64_t numel = 0;
  char op[16] = {};
  char dtype[16] = {};
  char tag[96] = {};
};

Fingerprint make_fingerprint(const OpInfo& info);
// "allreduce(float32, 1024) #57 from ddp.bucket[3]", as OpInfo::describe().
std::string describe(const Fingerprint& f);
// Whether two ranks calling `a` and `b` are calling the same collective.
bool same_collective(const Fingerprint& a, const Fingerprint& b);
// nullopt when all agree; otherwise e.g. "collective desync: ranks 0,2 called allreduce(float32,
// 1024) #57 from ddp.bucket[3]; rank 1 called broadcast(int64, 1) #57 from sampler".
std::optional<std::string> describe_desync(const std::vector<Fingerprint>& by_rank);

// Collective over `comm`: allgathers this rank's fingerprint of `info` and throws
// CollectiveError(describe_desync(...)) on a mismatch.
void check_fingerprints(MPI_Comm comm, const OpInfo& info);

}  // namespace hpctrain
