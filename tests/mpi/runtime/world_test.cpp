// World (src/runtime/world.h) under real MPI: the Open MPI setting it defaults before MPI_Init
// reaches Open MPI itself, read back through the MPI tool interface as `hpctrain doctor` shows it
// (a launcher's own value winning is tests/cluster/test_cluster_doctor.sh's business).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "diag/host_pairs.h"

namespace {

TEST(World, TwoTcpLinksPerRankPairUnlessTheUserSetsIt) {
  // ctest's mpiexec does not set OMPI_MCA_btl_tcp_links, so World::init's default applies.
  const char* env = std::getenv("OMPI_MCA_btl_tcp_links");
  ASSERT_NE(env, nullptr) << "World::init left OMPI_MCA_btl_tcp_links unset";
  EXPECT_STREQ(env, "2");
  const std::string seen = hpctrain::mpi_transport_settings();
  if (seen.find("btl_tcp_links=") == std::string::npos)
    GTEST_SKIP() << "this MPI shows no btl_tcp_links control variable: " << seen;
  EXPECT_NE(seen.find("btl_tcp_links=2"), std::string::npos) << "Open MPI did not take the default: " << seen;
}

}  // namespace
