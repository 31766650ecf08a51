// classify_straggler and StragglerWatch on per-rank splits recorded from real 2-rank runs on
// this machine (ms per step: step, data wait, comm-blocked, wait in collectives; optimizer 0).
#include <gtest/gtest.h>

#include "metrics/straggler.h"
#include "metrics/straggler_watch.h"

using namespace hpctrain;

namespace {

RankSplit ms(double step, double data, double blocked, double wait) {
  RankSplit r;
  r.step_s = step * 1e-3;
  r.data_wait_s = data * 1e-3;
  r.comm_blocked_s = blocked * 1e-3;
  r.wait_s = wait * 1e-3;
  return r;
}

// cnn, CPU hog pinned to rank 1's core (test_straggler_compute.sh), interval at step 30.
const std::vector<RankSplit> kHog = {ms(372.7, 0.2, 92.6, 214.9), ms(371.6, 0.1, 31.0, 141.5)};
// mlp, rank 1's reads throttled on a loop device (test_straggler_data.sh), step 20: the
// figures its report printed (cost 793.9, data wait 794.2 vs 1.3); the rest filled in to match.
const std::vector<RankSplit> kData = {ms(812.0, 1.3, 790.1, 801.6), ms(812.1, 794.2, 0.4, 7.7)};
// mlp balanced, 500 steps: a quiet interval and one where both ranks were slowed alike.
const std::vector<RankSplit> kQuiet = {ms(2.3, 0.2, 0.0, 0.3), ms(2.3, 0.2, 0.0, 0.3)};
const std::vector<RankSplit> kBothSlow = {ms(21.1, 0.4, 14.5, 15.9), ms(21.1, 0.3, 13.2, 16.7)};
// cnn balanced on a loaded machine: one interval where rank 0 alone was slowed by a neighbour.
const std::vector<RankSplit> kNoisy = {ms(138.3, 0.8, 7.2, 46.4), ms(139.1, 0.4, 16.9, 73.6)};

RankSplit with_link(RankSplit r, double link_ms) {
  r.link_s = link_ms * 1e-3;
  return r;
}

// mlp, 2 namespace hosts, node1's egress at 200 Mbit/s (test_cluster_straggler_link.sh), step
// 20: the waits are alike (91.7 vs 90.9 ms), the probes of 256 KiB are not (0.25 vs 8.57 ms).
const std::vector<RankSplit> kSlowLink = {with_link(ms(97.3, 0.1, 87.9, 91.7), 0.25),
                                          with_link(ms(97.4, 0.1, 89.8, 90.9), 8.57)};
// The same hosts unshaped, step 10: probes 0.38 / 0.41 ms.
const std::vector<RankSplit> kLinksEven = {with_link(ms(11.4, 0.1, 4.2, 7.1), 0.38),
                                           with_link(ms(10.9, 0.1, 4.5, 6.1), 0.41)};

}  // namespace

TEST(Straggler, SlowOutboundLinkIsCommOnItsRank) {
  auto f = classify_straggler(kSlowLink, 0.05);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->rank, 1);
  EXPECT_EQ(f->cause, StragglerCause::kComm);
  EXPECT_EQ(f->link_to, 0);
  EXPECT_NEAR(f->value_s * 1e3, 8.57, 1e-9);
  EXPECT_NEAR(f->median_s * 1e3, 0.25, 1e-9);
  // The median wait (91.3 ms) times the share of the probe the slow link added.
  EXPECT_NEAR(f->cost_s * 1e3, 0.5 * (91.7 + 90.9) * (1 - 0.25 / 8.57), 1e-9);
  EXPECT_EQ(
      describe_straggler(*f, "node1", "node0"),
      "rank 1 on node1 (+88.6 ms/step, comm: its link to rank 0 on node0 took 8.6 ms per 256 KiB vs median 0.2 ms)");
}

TEST(Straggler, EvenLinksOrOneProbeOrASmallExcessNameNoLink) {
  EXPECT_FALSE(classify_straggler(kLinksEven, 0.05));
  std::vector<RankSplit> one = kSlowLink;  // only rank 1 probed (its neighbour shares its host)
  one[0].link_s = 0;
  EXPECT_FALSE(classify_straggler(one, 0.05));
  std::vector<RankSplit> small = kSlowLink;  // 4x slower, but only 0.6 ms longer: jitter
  small[0].link_s = 0.2e-3;
  small[1].link_s = 0.8e-3;
  EXPECT_FALSE(classify_straggler(small, 0.05));
  std::vector<RankSplit> idle = kSlowLink;  // a slow link the job barely uses costs little
  for (RankSplit& r : idle) r.wait_s = 1e-3, r.comm_blocked_s = 0.5e-3;
  EXPECT_FALSE(classify_straggler(idle, 0.05));
}

TEST(Straggler, AComputeStragglerOutranksASlowLink) {
  std::vector<RankSplit> r = kHog;
  r[0].link_s = 20e-3;  // rank 0's link slow too, yet rank 1's hog is what the others wait for
  r[1].link_s = 0.3e-3;
  auto f = classify_straggler(r, 0.05);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->rank, 1);
  EXPECT_EQ(f->cause, StragglerCause::kCompute);
  EXPECT_EQ(f->link_to, -1);
}

TEST(Straggler, CpuHogIsComputeOnRank1) {
  auto f = classify_straggler(kHog, 0.05);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->rank, 1);
  EXPECT_EQ(f->cause, StragglerCause::kCompute);
  EXPECT_NEAR(f->cost_s * 1e3, 214.9 - 141.5, 1e-9);
  EXPECT_NEAR(f->value_s * 1e3, 371.6 - 0.1 - 31.0, 1e-9);
  EXPECT_NEAR(f->median_s * 1e3, 372.7 - 0.2 - 92.6, 1e-9);
  EXPECT_EQ(describe_straggler(*f, "node1"), "rank 1 on node1 (+73.4 ms/step, compute 340.5 ms vs median 279.9 ms)");
}

TEST(Straggler, ThrottledReadsAreData) {
  auto f = classify_straggler(kData, 0.05);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->rank, 1);
  EXPECT_EQ(f->cause, StragglerCause::kData);
  EXPECT_EQ(describe_straggler(*f, "vm"), "rank 1 on vm (+793.9 ms/step, data-wait 794.2 ms vs median 1.3 ms)");
}

TEST(Straggler, BalancedIntervalsNameNobody) {
  EXPECT_FALSE(classify_straggler(kQuiet, 0.05));
  EXPECT_FALSE(classify_straggler(kBothSlow, 0.05));
}

TEST(Straggler, LateArrivalWithOwnSplitLikeTheOthersIsComm) {
  // 4 ranks: rank 2 computes and loads like the others, yet they wait 20 ms for its data.
  std::vector<RankSplit> r = {ms(50, 1, 20, 22), ms(50, 1, 19, 21), ms(50, 1, 1, 2), ms(50, 1, 20, 23)};
  r[2].comm_blocked_s = 19e-3;  // its own step split matches the others'
  auto f = classify_straggler(r, 0.05);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->rank, 2);
  EXPECT_EQ(f->cause, StragglerCause::kComm);
  EXPECT_NEAR(f->cost_s * 1e3, 22 - 2, 1e-9);  // the others' median wait minus its wait
}

TEST(Straggler, SubMillisecondCostOnShortStepsIsJitterNotAStraggler) {
  // 4 ms steps, rank 0 waits 1.6 ms less than rank 1: 40% of the step, but below the 2 ms floor.
  std::vector<RankSplit> r = {ms(4, 0, 2.0, 0.2), ms(4, 0, 0.4, 1.8)};
  EXPECT_FALSE(classify_straggler(r, 0.05));
}

TEST(Straggler, MixedExcessIsUnknown) {
  // Rank 0's extra data wait and extra compute each explain a third of what it costs.
  std::vector<RankSplit> r = {ms(100, 10, 5, 5), ms(100, 0, 35, 35)};
  r[0].comm_blocked_s = 5e-3 + 10e-3;  // leaves 10 ms extra compute, 10 ms extra data
  r[0].data_wait_s = 10e-3;
  auto f = classify_straggler(r, 0.05);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->cause, StragglerCause::kUnknown);
}

TEST(Straggler, ThresholdZeroOneRankOrEmptyIntervalIsOff) {
  EXPECT_FALSE(classify_straggler(kHog, 0));
  EXPECT_FALSE(classify_straggler({kHog[0]}, 0.05));
  std::vector<RankSplit> empty = kHog;
  empty[0].step_s = 0;
  EXPECT_FALSE(classify_straggler(empty, 0.05));
  EXPECT_FALSE(classify_straggler(kHog, 0.5));  // 73 ms is under half of a 372 ms step
}

TEST(StragglerWatch, OneNoisyIntervalIsNotReported) {
  ASSERT_TRUE(classify_straggler(kNoisy, 0.05));  // the classifier alone would name rank 0
  StragglerWatch w(0.05, {"node0", "node1"}, 0);
  EXPECT_FALSE(w.observe(kNoisy));
  EXPECT_FALSE(w.observe(kQuiet));
  EXPECT_FALSE(w.observe(kNoisy));
  EXPECT_TRUE(w.summary().is_null());
}

TEST(StragglerWatch, SecondIntervalReportsAndSummaryCountsMostOften) {
  StragglerWatch w(0.05, {"node0", "node1"}, 0);
  EXPECT_FALSE(w.observe(kHog));  // first interval: a candidate
  auto f = w.observe(kHog);       // second: reported
  ASSERT_TRUE(f);
  std::string note;
  nlohmann::json rec;
  w.annotate(kHog, note, rec);
  EXPECT_EQ(note, "slowest: rank 1 on node1 (+73.4 ms/step, compute 340.5 ms vs median 279.9 ms)");
  EXPECT_EQ(rec["straggler"]["rank"], 1);
  EXPECT_EQ(rec["straggler"]["host"], "node1");
  EXPECT_EQ(rec["straggler"]["cause"], "compute");
  EXPECT_EQ(rec["straggler"]["per_rank"].size(), 2u);
  EXPECT_NEAR(rec["straggler"]["per_rank"][1]["compute_s"].get<double>(), 0.3405, 1e-9);
  auto g = w.observe(kData);  // the same rank again (now slow for another reason): still reported
  ASSERT_TRUE(g);
  EXPECT_EQ(g->cause, StragglerCause::kData);
  EXPECT_FALSE(w.observe(kQuiet));
  nlohmann::json s = w.summary();
  EXPECT_EQ(s["rank"], 1);
  EXPECT_EQ(s["host"], "node1");
  EXPECT_EQ(s["intervals"], 3);
  EXPECT_EQ(s["of"], 5);
}

TEST(StragglerWatch, ThresholdZeroObservesNothing) {
  StragglerWatch w(0, {"a", "b"}, 0);
  EXPECT_FALSE(w.observe(kHog));
  EXPECT_FALSE(w.observe(kHog));
  EXPECT_TRUE(w.summary().is_null());
}

TEST(Straggler, SplitsLineForTheWatchdogNote) {
  EXPECT_EQ(splits_line(kQuiet),
            "step/data-wait/compute/comm-blocked/collective-wait ms per step: r0 2.3/0.2/2.1/0.0/0.3, r1 "
            "2.3/0.2/2.1/0.0/0.3");
  EXPECT_EQ(splits_line(kSlowLink),
            "step/data-wait/compute/comm-blocked/collective-wait ms per step: r0 97.3/0.1/9.3/87.9/91.7 (link probe "
            "0.25 ms), r1 97.4/0.1/7.5/89.8/90.9 (link probe 8.57 ms)");
}
