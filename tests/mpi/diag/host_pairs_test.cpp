// The network facts `doctor` prints, on 1, 2 and 4 ranks of ONE host: no host pairs to measure,
// the MPI transport settings named, interfaces as name=IPv4. Two and more hosts:
// tests/cluster/test_cluster_misconfig.sh (part e) on namespace hosts.
#include <gtest/gtest.h>

#include <regex>
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
  for (const auto& i : ipv4_interfaces()) EXPECT_TRUE(std::regex_match(i, form)) << i;
}

}  // namespace
}  // namespace hpctrain
