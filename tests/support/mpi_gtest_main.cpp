// gtest main for every test binary (unit and MPI).
// - Initializes the hpctrain World (a singleton world when started without mpiexec).
// - Only rank 0 prints gtest's normal output.
// - Any failed assertion on any rank prints "[rank R] file:line: message" and aborts the
//   whole world at once, so no other rank is left waiting in a collective; mpiexec then exits
//   non-zero and ctest reports the failure.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <cstdio>
#include <string>

#include "runtime/world.h"

namespace {

class AbortOnFailure : public ::testing::EmptyTestEventListener {
 public:
  explicit AbortOnFailure(int rank) : rank_(rank) {}
  // The test's name is kept here because OnTestPartResult runs while gtest holds the
  // UnitTest mutex: calling current_test_info() from it self-deadlocks (the world then hangs
  // instead of aborting).
  void OnTestStart(const ::testing::TestInfo& info) override { test_ = info.name(); }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure in %s\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                 r.line_number(), test_.c_str(), r.message());
    std::fflush(stderr);
    if (hpctrain::World::get().size() > 1) hpctrain::World::get().abort(1);
  }

 private:
  int rank_;
  std::string test_ = "?";
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto& world = hpctrain::World::init(&argc, &argv);
  at::set_num_threads(1);
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (world.rank() != 0) delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new AbortOnFailure(world.rank()));
  int rc = RUN_ALL_TESTS();
  // Every rank's result counts: the test fails if any rank failed.
  int any = 0;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, world.mpi_comm());
  world.finalize();
  return any;
}
