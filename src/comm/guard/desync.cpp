// Desync fingerprints: fixed-size structs (strings truncated into char arrays), so that
// check_fingerprints can MPI_Allgather them as bytes. describe_desync groups the ranks by what
// they called, groups in order of their lowest rank.
#include "comm/guard/desync.h"

#include <cstring>

#include "comm/guard/flight_recorder.h"
#include "runtime/check.h"

namespace hpctrain {
namespace {

template <size_t N>
void copy_field(char (&dst)[N], const std::string& src) {
  size_t n = std::min(src.size(), N - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

template <size_t N>
std::string field(const char (&src)[N]) {
  return std::string(src, strnlen(src, N));
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

Fingerprint make_fingerprint(const OpInfo& info) {
  Fingerprint f;
  f.seq = info.seq;
  f.numel = info.numel;
  copy_field(f.op, info.op);
  copy_field(f.dtype, info.dtype);
  copy_field(f.tag, info.tag);
  return f;
}

std::string describe(const Fingerprint& f) {
  OpInfo i;
  i.op = field(f.op);
  i.dtype = field(f.dtype);
  i.numel = f.numel;
  i.seq = f.seq;
  i.tag = field(f.tag);
  return i.describe();
}

bool same_collective(const Fingerprint& a, const Fingerprint& b) {
  bool same =
      a.seq == b.seq && field(a.op) == field(b.op) && field(a.dtype) == field(b.dtype) && field(a.tag) == field(b.tag);
  if (field(a.op) != "allgather") same = same && a.numel == b.numel;
  return same;
}

std::optional<std::string> describe_desync(const std::vector<Fingerprint>& by_rank) {
  // Group ranks by what they called, in order of each group's lowest rank.
  std::vector<std::pair<Fingerprint, std::vector<int>>> groups;
  for (int r = 0; r < static_cast<int>(by_rank.size()); ++r) {
    bool placed = false;
    for (auto& [f, ranks] : groups)
      if (same_collective(f, by_rank[r])) ranks.push_back(r), placed = true;
    if (!placed) groups.push_back({by_rank[r], {r}});
  }
  if (groups.size() <= 1) return std::nullopt;
  std::string msg = "collective desync: ";
  for (size_t g = 0; g < groups.size(); ++g)
    msg += (g ? "; " : "") + rank_list(groups[g].second) + " called " + describe(groups[g].first);
  return msg;
}

void check_fingerprints(MPI_Comm comm, const OpInfo& info) {
  int size = 1;
  HPC_MPI_CHECK(MPI_Comm_size(comm, &size));
  Fingerprint mine = make_fingerprint(info);
  std::vector<Fingerprint> all(size);
  HPC_MPI_CHECK(MPI_Allgather(&mine, sizeof(Fingerprint), MPI_BYTE, all.data(), sizeof(Fingerprint), MPI_BYTE, comm));
  if (auto msg = describe_desync(all)) {
    FlightRecorder::get().dump(*msg);  // every rank sees the same fingerprints: every rank dumps
    throw CollectiveError(*msg);
  }
}

}  // namespace hpctrain
