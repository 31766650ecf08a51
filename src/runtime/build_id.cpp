// The build id (xxh3 of the executable's and libhpctrain's bytes, read once) and the
// collective check that every rank runs the same build.
#include "runtime/build_id.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <xxhash.h>

#include <cstdio>
#include <map>
#include <vector>

#include "runtime/check.h"
#include "runtime/world.h"

namespace hpctrain {
namespace {

void hash_file(XXH3_state_t* st, const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error("cannot read " + path + " to identify the hpctrain build");
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) XXH3_64bits_update(st, buf.data(), n);
  std::fclose(f);
}

std::string real(const char* p) {
  char out[PATH_MAX];
  return realpath(p, out) ? std::string(out) : std::string(p);
}

}  // namespace

std::string build_id() {
  static const std::string id = [] {
    XXH3_state_t* st = XXH3_createState();
    XXH3_64bits_reset(st);
    const std::string exe = real("/proc/self/exe");
    hash_file(st, exe);
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&check_same_build), &info) && info.dli_fname) {
      const std::string lib = real(info.dli_fname);
      if (lib != exe) hash_file(st, lib);
    }
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(XXH3_64bits_digest(st)));
    XXH3_freeState(st);
    return std::string(hex);
  }();
  return id;
}

void check_same_build(World& world) {
  // Fixed-size records: 16 hex digits + hostname.
  struct Rec {
    char id[17];
    char host[111];
  } mine{};
  std::snprintf(mine.id, sizeof(mine.id), "%s", build_id().c_str());
  std::snprintf(mine.host, sizeof(mine.host), "%s", world.hostname().c_str());
  std::vector<Rec> all(world.size());
  HPC_MPI_CHECK(MPI_Allgather(&mine, sizeof(Rec), MPI_BYTE, all.data(), sizeof(Rec), MPI_BYTE, world.mpi_comm()));
  const std::string ref = all[0].id;
  // host -> (build, ranks), in order of first rank; the hosts that agree with rank 0 only if
  // some other host differs.
  std::map<std::pair<std::string, std::string>, std::vector<int>> groups;
  bool differ = false;
  for (int r = 0; r < world.size(); ++r) {
    groups[{all[r].id, all[r].host}].push_back(r);
    differ = differ || ref != all[r].id;
  }
  if (!differ) return;
  auto describe = [](const std::pair<std::string, std::string>& key, const std::vector<int>& ranks) {
    std::string s = key.second + " (rank" + (ranks.size() > 1 ? "s " : " ");
    for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
    return s + ") has " + key.first;
  };
  std::string odd, same;
  for (auto& [key, ranks] : groups) {
    std::string& into = key.first == ref ? same : odd;
    into += (into.empty() ? "" : ", ") + describe(key, ranks);
  }
  throw CollectiveError("hosts run different hpctrain builds: " + odd + "; " + same +
                        " (rank 0's); rebuild, or run the same binary path on every host");
}

}  // namespace hpctrain
