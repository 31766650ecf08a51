// agree_on_failure / run_on_rank0 on 1, 2 and 4 ranks: the outcomes every rank agrees on.
// (Some ranks failing ends in MPI_Abort, which a gtest binary cannot observe: the e2e battery
// covers the resulting behaviour through the CLI.)
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <string>

#include "runtime/agree.h"
#include "runtime/check.h"
#include "runtime/error_line.h"
#include "support/test_world.h"

namespace hpctrain {
namespace {

using testing::world;

TEST(Agree, NoFailureReturnsAndRunsTheBodyOnEveryRank) {
  int runs = 0;
  agree_on_failure(world().mpi_comm(), [&] { ++runs; });
  EXPECT_EQ(runs, 1);
}

TEST(Agree, FailureOnEveryRankIsACollectiveErrorWithRankZerosMessage) {
  try {
    agree_on_failure(world().mpi_comm(), [&] { throw Error("bad file on rank " + std::to_string(world().rank())); });
    FAIL() << "no exception";
  } catch (const CollectiveError& e) {
    EXPECT_EQ(std::string(e.what()), "bad file on rank 0");  // identical on every rank
  }
}

TEST(Agree, RankZeroOnlyBodyErrorReachesEveryRankWithContext) {
  int runs = 0;
  try {
    run_on_rank0(world().mpi_comm(), "ckpt verify", [&] {
      ++runs;
      throw Error("checksum mismatch");
    });
    FAIL() << "no exception";
  } catch (const CollectiveError& e) {
    EXPECT_EQ(std::string(e.what()), "ckpt verify: checksum mismatch");
  }
  EXPECT_EQ(runs, world().rank() == 0 ? 1 : 0);
  run_on_rank0(world().mpi_comm(), "", [] {});  // success: returns on every rank
}

// A LibTorch error carries a multi-line C++ backtrace in what(): every rank gets its first line,
// so the guard prints one line (issue #45: generate from a NaN checkpoint printed the backtrace).
TEST(Agree, LibTorchErrorsReachEveryRankAsOneLine) {
  try {
    run_on_rank0(world().mpi_comm(), "generate",
                 [] { TORCH_CHECK(false, "probability tensor contains either `inf`, `nan` or element < 0"); });
    FAIL() << "no exception";
  } catch (const CollectiveError& e) {
    EXPECT_EQ(std::string(e.what()), "generate: probability tensor contains either `inf`, `nan` or element < 0");
  }
  try {
    agree_on_failure(world().mpi_comm(), [] { TORCH_CHECK(false, "shape mismatch\nsecond line"); });
    FAIL() << "no exception";
  } catch (const CollectiveError& e) {
    EXPECT_EQ(std::string(e.what()), "shape mismatch");
  }
}

TEST(ErrorLine, OneLineOfAnyError) {
  EXPECT_EQ(error_line(Error("plain")), "plain");
  EXPECT_EQ(error_line(std::runtime_error("first\nsecond")), "first");
  EXPECT_EQ(error_line(std::runtime_error("")), "unknown error");
  try {
    TORCH_CHECK(false, "mat1 and mat2 shapes cannot be multiplied");
  } catch (const c10::Error& e) {
    ASSERT_NE(std::string(e.what()).find('\n'), std::string::npos);  // the backtrace
    EXPECT_EQ(error_line(e), "mat1 and mat2 shapes cannot be multiplied");
  }
  // TorchScript's interpreter: a fixed sentence, its traceback, and the cause last.
  const c10::Error ts(c10::SourceLocation{"f", "file.cpp", 1},
                      "The following operation failed in the TorchScript interpreter.\n"
                      "Traceback of TorchScript (most recent call last):\n  File \"m.py\", line 3\n    raise\n"
                      "RuntimeError: boom\n");
  EXPECT_EQ(error_line(ts), "The following operation failed in the TorchScript interpreter. RuntimeError: boom");
}

}  // namespace
}  // namespace hpctrain
