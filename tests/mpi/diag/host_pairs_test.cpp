// The network facts `doctor` prints, on 1, 2 and 4 ranks of ONE host: no host pairs to measure,
// the MPI transport settings named, interfaces as name=IPv4. Two and more hosts:
// tests/cluster/test_cluster_misconfig.sh (part e) on namespace hosts.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <regex>
#include <set>
#include <string>

#include "diag/host_pairs.h"
#include "support/test_world.h"

namespace hpctrain {
namespace {

using testing::world;

TEST(HostPairs, OneHostHasNoPairsOnAnyRank) {
  auto rows = measure_host_pairs(world().mpi_comm(), 1 << 16, 3);
  EXPECT_TRUE(rows.empty());
}

TEST(HostPairs, TransportSettingsNameThePml) {
  const std::string s = mpi_transport_settings();
  EXPECT_NE(s.find("pml="), std::string::npos) << s;
  EXPECT_NE(s.find("btl="), std::string::npos) << s;
}

TEST(HostPairs, InterfacesAreNameEqualsIpv4) {
  const std::regex form(R"([^=\s]+=\d+\.\d+\.\d+\.\d+)");
  const std::vector<std::string> got = ipv4_interfaces();
  for (const auto& i : got) EXPECT_TRUE(std::regex_match(i, form)) << i;
  // The same list as iproute2's (up, IPv4, not the loopback), so an empty or partial list fails
  // wherever the host has an interface.
  FILE* p = popen(
      "command -v ip >/dev/null || exit 3; ip -o -4 addr show up 2>/dev/null | awk '$2 != \"lo\" {split($4, a, \"/\"); "
      "print $2 \"=\" a[1]}'",
      "r");
  ASSERT_NE(p, nullptr);
  std::set<std::string> want;
  char line[256];
  while (std::fgets(line, sizeof(line), p)) {
    std::string l = line;
    while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
    if (!l.empty()) want.insert(l);
  }
  const int st = pclose(p);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 3) GTEST_SKIP() << "iproute2's `ip` is not available to compare with";
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()), want);
}

}  // namespace
}  // namespace hpctrain
