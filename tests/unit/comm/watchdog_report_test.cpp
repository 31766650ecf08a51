// Pure pieces of the watchdog and desync detection: report text, fingerprint comparison,
// settings from the environment, and the comm thread's end hook on failed jobs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>

#include "comm/comm_settings.h"
#include "comm/guard/desync.h"
#include "comm/guard/watchdog_report.h"
#include "runtime/check.h"

using namespace hpctrain;

namespace {

OpInfo op(const char* name, const char* dtype, int64_t numel, uint64_t seq, const char* tag) {
  OpInfo i;
  i.op = name;
  i.dtype = dtype;
  i.numel = numel;
  i.seq = seq;
  i.tag = tag;
  return i;
}

PeerStatus peer(int rank, const OpInfo& last, bool finished, int64_t step) {
  PeerStatus p;
  p.rank = rank;
  p.lanes = 1;
  p.lane[0].started = last.seq;
  p.lane[0].finished = finished ? last.seq : last.seq - 1;
  p.lane[0].step = step;
  p.lane[0].last = make_fingerprint(last);
  return p;
}

}  // namespace

TEST(WatchdogReport, NamesOpSeqTagStepAndTheMissingRank) {
  OpInfo stuck = op("allreduce", "float32", 1024, 57, "ddp.bucket[3]");
  OverdueOp o{0, "mpi", stuck, 120, 5};
  std::vector<std::optional<PeerStatus>> by_rank = {peer(0, stuck, false, 120), peer(1, stuck, false, 120),
                                                    peer(2, op("barrier", "none", 0, 56, "step.end"), true, 119)};
  EXPECT_EQ(format_timeout_report(1, o, by_rank),
            "rank 1: collective allreduce(float32, 1024) #57 from ddp.bucket[3] at step 120 timed "
            "out after 5 s; ranks that reached it: 0,1; ranks that did not: 2 (last op "
            "barrier(none, 0) #56 from step.end, finished, step 119)");
}

TEST(WatchdogReport, NamesSilentRanksAndRanksInAnotherCollective) {
  OpInfo stuck = op("allreduce", "float32", 8, 4, "b");
  OverdueOp o{0, "nccl", stuck, -1, 2.5};
  std::vector<std::optional<PeerStatus>> by_rank = {
      peer(0, stuck, false, -1), peer(1, op("broadcast", "int64", 1, 4, "sampler"), false, -1), std::nullopt,
      peer(3, op("allreduce", "float32", 8, 5, "b"), false, -1)};
  EXPECT_EQ(format_timeout_report(0, o, by_rank),
            "rank 0: nccl collective allreduce(float32, 8) #4 from b timed out after 2.5 s; ranks "
            "that reached it: 0,3; ranks in a different collective at #4: 1 (broadcast(int64, 1) "
            "#4 from sampler); ranks that did not answer (dead, or hung with their watchdog): 2");
}

TEST(Desync, AgreeingFingerprintsPass) {
  auto f = make_fingerprint(op("allreduce", "float32", 1024, 57, "ddp.bucket[3]"));
  EXPECT_EQ(describe_desync({f, f, f}), std::nullopt);
  // allgather contributions may differ in size.
  auto g0 = make_fingerprint(op("allgather", "uint8", 10, 3, "doctor.report"));
  auto g1 = make_fingerprint(op("allgather", "uint8", 12, 3, "doctor.report"));
  EXPECT_EQ(describe_desync({g0, g1}), std::nullopt);
}

TEST(Desync, MismatchNamesRanksAndBothFingerprints) {
  auto a = make_fingerprint(op("allreduce", "float32", 1024, 57, "ddp.bucket[3]"));
  auto b = make_fingerprint(op("broadcast", "int64", 1, 57, "sampler"));
  EXPECT_EQ(describe_desync({a, b, a}),
            "collective desync: ranks 0,2 called allreduce(float32, 1024) #57 from ddp.bucket[3]; "
            "rank 1 called broadcast(int64, 1) #57 from sampler");
  // Each field alone is a desync: count, dtype, tag.
  auto n = make_fingerprint(op("allreduce", "float32", 1023, 57, "ddp.bucket[3]"));
  auto d = make_fingerprint(op("allreduce", "float64", 1024, 57, "ddp.bucket[3]"));
  auto t = make_fingerprint(op("allreduce", "float32", 1024, 57, "ddp.bucket[4]"));
  for (auto& other : {n, d, t}) EXPECT_NE(describe_desync({a, other}), std::nullopt);
}

TEST(Desync, LongTagsAreTruncatedNotOverflowed) {
  std::string tag(300, 'x');
  auto f = make_fingerprint(op("barrier", "none", 0, 1, tag.c_str()));
  EXPECT_EQ(describe(f), "barrier(none, 0) #1 from " + std::string(95, 'x'));
}

TEST(CommSettings, DefaultsAndEnvironment) {
  unsetenv("HPCTRAIN_COLLECTIVE_TIMEOUT");
  unsetenv("HPCTRAIN_DEBUG_COLLECTIVES");
  EXPECT_EQ(CommSettings::from_env().collective_timeout_s, 300);
  EXPECT_FALSE(CommSettings::from_env().debug_collectives);
  setenv("HPCTRAIN_COLLECTIVE_TIMEOUT", "2.5", 1);
  setenv("HPCTRAIN_DEBUG_COLLECTIVES", "1", 1);
  EXPECT_EQ(CommSettings::from_env().collective_timeout_s, 2.5);
  EXPECT_TRUE(CommSettings::from_env().debug_collectives);
  setenv("HPCTRAIN_COLLECTIVE_TIMEOUT", "5s", 1);
  EXPECT_THROW(CommSettings::from_env(), Error);
  setenv("HPCTRAIN_COLLECTIVE_TIMEOUT", "0", 1);
  setenv("HPCTRAIN_DEBUG_COLLECTIVES", "maybe", 1);
  EXPECT_THROW(CommSettings::from_env(), Error);
  unsetenv("HPCTRAIN_COLLECTIVE_TIMEOUT");
  unsetenv("HPCTRAIN_DEBUG_COLLECTIVES");
}
