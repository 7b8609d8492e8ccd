// ds4-bench --limits (tools/ds4-bench/machine_limits.h): the arithmetic that turns a row into its
// share of the read bandwidth and of the int8 peak, the memory-bound ceiling of a step of
// several rows, and the int8 peak's measurement on this CPU.
#include <gtest/gtest.h>

#include <string>

#include "machine_limits.h"

namespace ds4::bench {
namespace {

StepCount made_up_count() {
    StepCount c;
    c.dense = 600e6, c.routed = 100e6, c.shared = 100e6, c.output = 200e6, c.embd = 0;
    c.indexer_query = 50e6, c.indexer_top_k = 512, c.skips_indexer = true;
    c.prefill_macs = 0.5e9;
    return c;
}

TEST(BenchLimits, StepBytesAndCeiling) {
    const StepCount c = made_up_count();
    EXPECT_DOUBLE_EQ(c.all(), 1000e6);
    EXPECT_DOUBLE_EQ(c.at(2050), 950e6);   // 2051 / 4 = top-k compressed rows: skipped
    EXPECT_DOUBLE_EQ(c.at(2051), 1000e6);  // beyond: the indexer's queries are read
    EXPECT_DOUBLE_EQ(c.step(4096, 4), 1300e6);  // + 3 rows' routed experts
    EXPECT_DOUBLE_EQ(c.ceiling(4096, 1), 1.0);
    EXPECT_DOUBLE_EQ(c.ceiling(4096, 4), 4 * 1000e6 / 1300e6);
}

TEST(BenchLimits, OneRowAgainstBandwidthAndPeak) {
    Limits l{made_up_count(), 50, 1000};
    Row r;
    r.ctx_tokens = 4096, r.prefill_tokens = 512, r.prefill_tps = 200, r.gen_tokens = 32, r.gen_tps = 25;
    // 200 t/s x 1 GOP = 200 GOP/s = 20% of 1000; 1000 MB x 25 t/s = 25 GB/s = 50% of 50.
    EXPECT_EQ(limits_line(r, l),
              "prefill 200.00 t/s x 1.000 GOP/token = 200.0 GOP/s = 20.0% of the int8 peak (1000 GOP/s); "
              "decode 1000 MB/token x 25.00 t/s = 25.00 GB/s = 50.0% of the bandwidth (50.00 GB/s)");
    l.int8_peak_gops = 0;  // unknown peak: the rate alone
    r.gen_tokens = 0;      // prefill only
    EXPECT_EQ(limits_line(r, l), "prefill 200.00 t/s x 1.000 GOP/token = 200.0 GOP/s");
    r.prefill_tokens = 0;
    EXPECT_EQ(limits_line(r, l), "");
}

TEST(BenchLimits, SeveralSequencesReadTheirExpertsEach) {
    const Limits l{made_up_count(), 50, 1000};
    Row r;
    r.ctx_tokens = 4096, r.gen_tokens = 32, r.gen_tps = 40, r.sessions = 4;
    // 10 steps/s x 1300 MB = 13 GB/s = 26% of 50; at 50 GB/s: 4 x 50e9 / 1300e6 = 153.85 t/s.
    EXPECT_EQ(limits_line(r, l),
              "decode: a step of 4.00 rows reads 1300 MB (1000 + 3.00 x 100 MB of routed experts), "
              "10.00 steps/s = 13.00 GB/s = 26.0% of the bandwidth (50.00 GB/s); memory-bound "
              "ceiling 153.85 t/s (3.08x one row)");
}

TEST(BenchLimits, VerificationStepsCountTheirRows) {
    const Limits l{made_up_count(), 50, 0};
    Row r;
    r.ctx_tokens = 4096, r.gen_tokens = 40, r.gen_tps = 20, r.draft_max = 3;
    r.steps = 10, r.drafted = 30, r.accepted = 30;  // 4 rows and 4 tokens a step
    // 5 steps/s x (1000 + 3 x 100) MB = 6.5 GB/s = 13%; ceiling 4 x 50e9 / 1300e6 t/s.
    EXPECT_EQ(limits_line(r, l),
              "decode: a step of 4.00 rows reads 1300 MB (1000 + 3.00 x 100 MB of routed experts), "
              "5.00 steps/s = 6.50 GB/s = 13.0% of the bandwidth (50.00 GB/s); memory-bound "
              "ceiling 153.85 t/s (3.08x one row)");
}

TEST(BenchLimits, Int8PeakIsTheIsasThroughputTimesTheClock) {
    const Int8Peak p = probe_int8_peak(2);
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512bw")) {
        EXPECT_EQ(p.gops, 0);
        GTEST_SKIP() << "no AVX-512 VNNI";
    }
    EXPECT_GT(p.ghz, 0.5);
    EXPECT_LT(p.ghz, 8.0);
    EXPECT_GE(p.per_cycle_isa, 0.5);
    EXPECT_DOUBLE_EQ(p.gops, 2 * p.per_cycle_isa * 64 * 2 * p.ghz);
    EXPECT_NE(p.how().find("vpdpbusd/cycle"), std::string::npos) << p.how();
}

TEST(BenchLimits, BandwidthProbeReportsTheFasterWay) {
    const Bandwidth bw = probe_bandwidth(8, 1, 1);
    EXPECT_GT(bw.gbps, 0);
    EXPECT_DOUBLE_EQ(bw.gbps, bw.prefetch ? bw.ahead : bw.plain);
    EXPECT_LE(bw.min, bw.gbps);
    EXPECT_GE(bw.max, bw.gbps);
}

}  // namespace
}  // namespace ds4::bench
