// OpGuard (comm/guard/op_guard.h) is the one door of every backend: a fake backend that only
// calls the guard gets the watchdog, the flight recorder, the desync check and the wait meter.
// 1, 2 and 4 ranks.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "comm/comm_settings.h"
#include "comm/communicator.h"
#include "comm/guard/flight_recorder.h"
#include "comm/guard/op_guard.h"
#include "comm/guard/wait_meter.h"
#include "comm/guard/watchdog.h"
#include "runtime/check.h"
#include "support/test_world.h"

using namespace hpctrain;
using hpctrain::testing::world;

namespace {

class DoneWork final : public Work {
 public:
  void wait() override {}
  bool done() const override { return true; }
};

// A backend of its own: runs each op at once on the caller with plain MPI, and passes the one
// guard exactly as the real backends do (submit, begin, the op, end). `during` runs inside the op.
class FakeBackend final : public Communicator {
 public:
  FakeBackend(const CommSettings& s, std::shared_ptr<Watchdog> wd)
      : guard_(world().mpi_comm(), s, std::move(wd), "fake", "fake", OpGuard::Lane::kSync) {}
  int rank() const override { return world().rank(); }
  int size() const override { return world().size(); }
  c10::DeviceType device_type() const override { return c10::DeviceType::CPU; }
  std::string name() const override { return "fake"; }

  WorkHandle allreduce(at::Tensor t, ReduceOp, std::string tag) override {
    return run(make_op_info("allreduce", t, t.numel(), std::move(tag)), [t] {
      HPC_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, t.data_ptr(), static_cast<int>(t.numel()), MPI_FLOAT, MPI_SUM,
                                  world().mpi_comm()));
    });
  }
  WorkHandle allreduce(std::vector<at::Tensor> ts, ReduceOp op, std::string tag) override {
    return allreduce(ts.at(0), op, std::move(tag));
  }
  WorkHandle broadcast(at::Tensor, int, std::string) override { throw Error("fake: no broadcast"); }
  WorkHandle allgather(at::Tensor, std::vector<at::Tensor>*, std::string) override { throw Error("fake: no allgather"); }
  WorkHandle barrier(std::string tag) override {
    return run(make_op_info("barrier", at::Tensor(), 0, std::move(tag)),
               [] { HPC_MPI_CHECK(MPI_Barrier(world().mpi_comm())); });
  }

  OpGuard& guard() { return guard_; }
  std::function<void()> during;

 private:
  template <class F>
  WorkHandle run(OpInfo info, F&& op) {
    guard_.submit(info);
    bool ok = false;
    try {
      guard_.begin(info);
      if (during) during();
      op();
      ok = true;
    } catch (...) {
      guard_.end(info, false);
      throw;
    }
    guard_.end(info, ok);
    return std::make_shared<DoneWork>();
  }

  OpGuard guard_;
};

std::string temp_dir() {
  auto d = std::filesystem::temp_directory_path() / ("op-guard-" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d.string();
}

}  // namespace

TEST(OpGuard, WatchdogFlightRecorderAndWaitMeterSeeTheFakeBackendsOps) {
  CommSettings s;
  s.collective_timeout_s = 60;
  auto wd = std::make_shared<Watchdog>(world().mpi_comm(), s.collective_timeout_s);
  FlightRecorder& flight = FlightRecorder::get();
  flight.configure(16, temp_dir(), world().rank(), world().size(), {"op-guard-test"});
  CollectiveWaitMeter& meter = CollectiveWaitMeter::get();
  meter.enable(true);
  const uint64_t metered_before = meter.count();
  {
    FakeBackend comm(s, wd);
    set_current_step(41);
    // Inside the op, the watchdog's lane has it started and not finished: a hang here would be
    // reported, naming the op and the step.
    LaneStatus inside;
    comm.during = [&] { inside = wd->own_status().lane[0]; };
    at::Tensor t = at::ones({8});
    comm.allreduce(t, ReduceOp::kSum, "fake.sum")->wait();
    EXPECT_EQ(inside.started, 1u);
    EXPECT_EQ(inside.finished, 0u);
    EXPECT_EQ(inside.step, 41);
    EXPECT_EQ(describe(inside.last), "allreduce(float32, 8) #1 from fake.sum");
    EXPECT_EQ(t[0].item<float>(), world().size());
    comm.during = nullptr;
    comm.barrier("fake.end")->wait();
    LaneStatus after = wd->own_status().lane[0];
    EXPECT_EQ(after.started, 2u);
    EXPECT_EQ(after.finished, 2u);
    // A failed op has ended for the watchdog and is recorded as failed.
    comm.during = [] { throw Error("the op failed"); };
    EXPECT_THROW(comm.barrier("fake.fails")->wait(), Error);
    EXPECT_EQ(wd->own_status().lane[0].finished, 3u);
  }
  std::vector<std::string> seen;
  for (const auto& r : flight.snapshot())
    if (r.lane == "fake") seen.push_back(r.op + "#" + std::to_string(r.seq) + ":" + FlightRecorder::state_name(r.state));
  EXPECT_EQ(seen, (std::vector<std::string>{"allreduce#1:done", "barrier#2:done", "barrier#3:failed"}));
  EXPECT_EQ(meter.count() - metered_before, 2u);  // the two ops that completed
  meter.enable(false);
  flight.configure(0, "", world().rank(), world().size(), {"op-guard-test"});
  set_current_step(-1);
  HPC_MPI_CHECK(MPI_Barrier(world().mpi_comm()));  // no rank tears its watchdog down while asked
}

TEST(OpGuard, DesyncIsCaughtForTheFakeBackendOnEveryRank) {
  CommSettings s;
  s.collective_timeout_s = 0;
  s.debug_collectives = true;
  FakeBackend comm(s, nullptr);
  at::Tensor t = at::ones({4});
  comm.allreduce(t, ReduceOp::kSum, "same")->wait();
  EXPECT_EQ(t[0].item<float>(), world().size());
  if (world().size() == 1) return;
  // Rank 0 reduces 4 elements where the others reduce 2: every rank gets the same error, before
  // any rank enters the mismatched MPI_Allreduce.
  at::Tensor mine = world().rank() == 0 ? at::ones({4}) : at::ones({2});
  std::string msg;
  try {
    comm.allreduce(mine, ReduceOp::kSum, "mismatch")->wait();
  } catch (const CollectiveError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("collective desync"), std::string::npos) << msg;
  EXPECT_NE(msg.find("allreduce(float32, 4) #2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("allreduce(float32, 2) #2"), std::string::npos) << msg;
  // Every later op fails the same way, without MPI (no rank hangs behind the desync).
  EXPECT_THROW(comm.barrier("later")->wait(), CollectiveError);
  HPC_MPI_CHECK(MPI_Barrier(world().mpi_comm()));
}

TEST(OpGuard, AsynchronousLaneEndsWhenItsDoneProbeFires) {
  CommSettings s;
  auto wd = std::make_shared<Watchdog>(world().mpi_comm(), 60.0);
  OpGuard guard(world().mpi_comm(), s, wd, "async", "async", OpGuard::Lane::kAsync);
  OpInfo info;
  info.op = "allreduce";
  info.dtype = "float32";
  info.numel = 1;
  guard.submit(info);
  auto fired = std::make_shared<std::atomic<bool>>(false);
  guard.begin(info, [fired] { return fired->load(); });
  EXPECT_EQ(wd->own_status().lane[0].started, 1u);
  EXPECT_EQ(wd->own_status().lane[0].finished, 0u);
  fired->store(true);  // the "stream" completes; the watchdog thread polls the probe
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (wd->own_status().lane[0].finished == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(wd->own_status().lane[0].finished, 1u);
  guard.end(info, true);
  HPC_MPI_CHECK(MPI_Barrier(world().mpi_comm()));
}
