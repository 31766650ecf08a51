// Collectives over MPI with 1, 2 and 4 ranks: values checked against closed forms.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstdlib>

#include "comm/router.h"
#include "diag/selftest.h"
#include "runtime/check.h"
#include "support/test_world.h"

using namespace hpctrain;
using hpctrain::testing::cpu_comm;
using hpctrain::testing::world;

namespace {

// Rank r holds (r + 1) * (i % 7 + 1) at element i; the sum over ranks is n(n+1)/2 * (i%7+1).
at::Tensor pattern(int64_t n, at::ScalarType dt, int rank) {
  return ((at::arange(n, at::kLong) % 7 + 1) * (rank + 1)).to(dt);
}

class AllreduceDtypes : public ::testing::TestWithParam<std::tuple<at::ScalarType, int64_t>> {};

TEST_P(AllreduceDtypes, SumAndAvgMatchClosedForm) {
  auto [dt, n] = GetParam();
  int w = world().size(), r = world().rank();
  double tri = w * (w + 1) / 2.0;
  at::Tensor base = at::arange(n, at::kLong) % 7 + 1;

  at::Tensor s = pattern(n, dt, r);
  cpu_comm().allreduce(s, ReduceOp::kSum)->wait();
  EXPECT_TRUE(at::equal(s.to(at::kDouble), base.to(at::kDouble) * tri));

  if (at::isFloatingType(dt)) {
    at::Tensor a = pattern(n, dt, r);
    cpu_comm().allreduce(a, ReduceOp::kAvg)->wait();
    at::Tensor want = (base.to(at::kDouble) * tri / w).to(dt).to(at::kDouble);
    EXPECT_TRUE(at::allclose(a.to(at::kDouble), want, 1e-6, 0)) << "avg " << c10::toString(dt);
  }
  at::Tensor mx = pattern(n, dt, r);
  cpu_comm().allreduce(mx, ReduceOp::kMax)->wait();
  EXPECT_TRUE(at::equal(mx.to(at::kDouble), base.to(at::kDouble) * w));
}

INSTANTIATE_TEST_SUITE_P(Collectives, AllreduceDtypes,
                         ::testing::Combine(::testing::Values(at::kFloat, at::kDouble, at::kHalf, at::kBFloat16,
                                                              at::kInt, at::kLong),
                                            ::testing::Values<int64_t>(0, 1, 1001)));

TEST(Allreduce, Large64MiBFloat32) {
  int64_t n = (64 << 20) / 4;
  at::Tensor t = pattern(n, at::kFloat, world().rank());
  cpu_comm().allreduce(t, ReduceOp::kSum)->wait();
  double tri = world().size() * (world().size() + 1) / 2.0;
  EXPECT_TRUE(at::equal(t, ((at::arange(n, at::kLong) % 7 + 1).to(at::kFloat) * tri)));
}

TEST(Allreduce, HalfTypesAreReducedInFloat32) {
  // 2048 + 1 + ... would lose the small terms if accumulated in fp16 pairwise; in fp32 the
  // single rounding at the end gives the correctly rounded sum.
  int w = world().size();
  at::Tensor t = at::full({4}, world().rank() == 0 ? 1000.0 : 0.25, at::kHalf);
  cpu_comm().allreduce(t, ReduceOp::kSum)->wait();
  double exact = 1000.0 + 0.25 * (w - 1);
  EXPECT_EQ(t[0].item<float>(), static_cast<float>(at::scalar_tensor(exact, at::kHalf).item<float>()));
}

TEST(Allreduce, ManyAsyncOpsCompleteInSubmissionOrder) {
  int w = world().size();
  std::vector<at::Tensor> ts;
  std::vector<WorkHandle> works;
  for (int i = 0; i < 64; ++i) {
    ts.push_back(at::full({1 + i * 37}, static_cast<float>(i + world().rank()), at::kFloat));
    works.push_back(cpu_comm().allreduce(ts.back(), ReduceOp::kSum, "order"));
  }
  // Completion is in order: when op i is done, every op before it is done.
  works[40]->wait();
  for (int i = 0; i <= 40; ++i) EXPECT_TRUE(works[i]->done()) << i;
  for (int i = 0; i < 64; ++i) {
    works[i]->wait();
    float want = static_cast<float>(i * w + w * (w - 1) / 2);
    EXPECT_TRUE(at::equal(ts[i], at::full_like(ts[i], want))) << i;
  }
}

TEST(Allreduce, ListOfTensorsAsOneMessage) {
  int w = world().size();
  std::vector<at::Tensor> ts = {at::ones({3, 4}), at::full({5}, 2.0), at::empty({0})};
  cpu_comm().allreduce(ts, ReduceOp::kSum)->wait();
  EXPECT_TRUE(at::equal(ts[0], at::full({3, 4}, static_cast<float>(w))));
  EXPECT_TRUE(at::equal(ts[1], at::full({5}, 2.0f * w)));
}

TEST(Allreduce, AvgOnIntegersIsAnError) {
  at::Tensor t = at::ones({3}, at::kInt);
  EXPECT_THROW(cpu_comm().allreduce(t, ReduceOp::kAvg), Error);
}

TEST(Allreduce, NonContiguousIsAnError) {
  at::Tensor t = at::ones({4, 4}).t();
  EXPECT_THROW(cpu_comm().allreduce(t, ReduceOp::kSum), Error);
}

TEST(Broadcast, FromEveryRoot) {
  for (int root = 0; root < world().size(); ++root) {
    at::Tensor t = at::full({1000}, world().rank() == root ? 7.0 + root : -1.0, at::kDouble);
    cpu_comm().broadcast(t, root)->wait();
    EXPECT_TRUE(at::equal(t, at::full({1000}, 7.0 + root, at::kDouble))) << "root " << root;
  }
}

TEST(Allgather, UnevenContributionsIncludingEmpty) {
  int r = world().rank();
  at::Tensor mine = at::full({r * 2, 3}, static_cast<int64_t>(r), at::kLong);  // rank 0: none
  std::vector<at::Tensor> parts;
  cpu_comm().allgather(mine, &parts)->wait();
  ASSERT_EQ(static_cast<int>(parts.size()), world().size());
  for (int q = 0; q < world().size(); ++q)
    EXPECT_TRUE(at::equal(parts[q], at::full({q * 2, 3}, static_cast<int64_t>(q), at::kLong))) << q;
}

TEST(Topology, LocalRankMatchesLauncher) {
  // Under mpirun, Open MPI exports the node-local rank; ours comes from MPI_Comm_split_type.
  if (const char* lr = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) EXPECT_EQ(world().local_rank(), std::atoi(lr));
  if (const char* ls = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) EXPECT_EQ(world().local_size(), std::atoi(ls));
  EXPECT_EQ(world().node_count(), 1);  // tests run on one host
  EXPECT_LT(world().local_rank(), world().local_size());
  if (!std::getenv("OMPI_COMM_WORLD_SIZE")) EXPECT_EQ(world().size(), 1);  // singleton world
}

TEST(Router, CudaTensorsWithoutNcclNameTheDevices) {
  DeviceRouter& router = static_cast<DeviceRouter&>(cpu_comm());
  try {
    router.backend(c10::DeviceType::CUDA);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
  }
}

TEST(SelfTest, AllChecksPassOnCpu) {
  for (auto& r : run_collective_selftest(cpu_comm(), c10::Device(c10::kCPU)))
    EXPECT_TRUE(r.ok) << r.check << ": " << r.detail;
}

}  // namespace
