// The ds4-bench contract on a generated tiny model: `ds4-bench -m MODEL --token-ids FILE
// --ctx-start N --ctx-max N --step-incr N --gen-tokens N --threads N --csv OUT` writes
// upstream's CSV with one row per frontier (incremental prefill intervals, positive finite
// rates, KV bytes growing with the context), its decode probe is the greedy continuation
// from the frontier (so snapshot/restore really brings the session back), bad arguments
// fail with a clear message, --spec-aid measures speculative verification (and checks its
// output), and bench/plot_speed.py turns the CSV into an SVG. Timings
// themselves are benchmarks (docs/PERFORMANCE.md), not tests.
#include <gtest/gtest.h>

#include <cctype>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/deepseek4/config.h"
#include "model/deepseek4/model.h"
#include "support/tool_run.h"

namespace ds4::deepseek4 {
namespace {

using test::binary;
using test::run_command;

struct CsvRow {
    long long ctx = 0, prefill = 0, gen = 0, kv = 0, sessions = 0;
    double prefill_tps = 0, gen_tps = 0;
};

std::vector<std::string> read_lines(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
}

// Parses the CSV; fails the test on the header or a malformed row.
std::vector<CsvRow> read_csv(const std::string& path) {
    const auto lines = read_lines(path);
    EXPECT_FALSE(lines.empty()) << path;
    if (lines.empty()) return {};
    EXPECT_EQ(lines[0], "ctx_tokens,prefill_tokens,prefill_tps,gen_tokens,gen_tps,kvcache_bytes,sessions");
    std::vector<CsvRow> rows;
    for (size_t i = 1; i < lines.size(); ++i) {
        CsvRow r;
        char c[6];
        std::istringstream ss(lines[i]);
        ss >> r.ctx >> c[0] >> r.prefill >> c[1] >> r.prefill_tps >> c[2] >> r.gen >> c[3] >>
            r.gen_tps >> c[4] >> r.kv >> c[5] >> r.sessions;
        EXPECT_TRUE(ss && ss.peek() == EOF) << "row " << i << ": " << lines[i];
        for (char k : c) EXPECT_EQ(k, ',') << lines[i];
        rows.push_back(r);
    }
    return rows;
}

// The number that follows `key` in `text` (-1, and a test failure, when key is missing).
double number_after(const std::string& text, const std::string& key) {
    const auto at = text.find(key);
    EXPECT_NE(at, std::string::npos) << key << " missing:\n" << text;
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + key.size()));
}

class BenchCli : public ::testing::Test {
protected:
    void SetUp() override {
        model_ = dir_.file("tiny.gguf");
        ASSERT_EQ(run_command({binary("ds4-gguf-gen"), "-q", "-o", model_, "--preset", "tiny",
                               "--seed", "9"}).exit_code, 0);
        n_vocab_ = Model::load(model_)->config().n_vocab;
        ids_ = test::random_token_ids(100, n_vocab_, 5);
        ids_file_ = dir_.file("ids.txt");
        test::write_token_ids(ids_file_, ids_);
    }

    test::RunResult bench(std::vector<std::string> extra) {
        std::vector<std::string> argv = {binary("ds4-bench"), "-m", model_, "--threads", "2"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        return run_command(argv);
    }

    test::TempDir dir_;
    std::string model_, ids_file_;
    int64_t n_vocab_ = 0;
    std::vector<int32_t> ids_;
};

TEST_F(BenchCli, OneRowPerFrontierWithIncrementalPrefill) {
    const std::string csv = dir_.file("out.csv");
    const auto r = bench({"--token-ids", ids_file_, "--ctx-start", "32", "--ctx-max", "80",
                          "--step-incr", "16", "--gen-tokens", "4", "--csv", csv});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto rows = read_csv(csv);
    ASSERT_EQ(rows.size(), 4u);
    const long long ctx[] = {32, 48, 64, 80}, prefill[] = {32, 16, 16, 16};
    for (size_t i = 0; i < rows.size(); ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(rows[i].ctx, ctx[i]);
        EXPECT_EQ(rows[i].prefill, prefill[i]);
        EXPECT_EQ(rows[i].gen, 4);
        EXPECT_TRUE(std::isfinite(rows[i].prefill_tps) && rows[i].prefill_tps > 0);
        EXPECT_TRUE(std::isfinite(rows[i].gen_tps) && rows[i].gen_tps > 0);
        EXPECT_GT(rows[i].kv, 0);
        EXPECT_EQ(rows[i].sessions, 1);
        if (i > 0) {
            EXPECT_GT(rows[i].kv, rows[i - 1].kv) << "KV bytes must grow with the context";
        }
    }
    // The table on stdout has the same frontiers.
    EXPECT_NE(r.output.find("prefill t/s"), std::string::npos) << r.output;
}

TEST_F(BenchCli, LastFrontierLandsOnCtxMaxAndZeroGenIsPrefillOnly) {
    const std::string csv = dir_.file("out.csv");
    const auto r = bench({"--token-ids", ids_file_, "--ctx-start", "20", "--ctx-max", "50",
                          "--step-incr", "12", "--gen-tokens", "0", "--csv", csv});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto rows = read_csv(csv);
    ASSERT_EQ(rows.size(), 4u);  // 20, 32, 44, then a shorter step to 50
    EXPECT_EQ(rows[2].ctx, 44);
    EXPECT_EQ(rows[3].ctx, 50);
    EXPECT_EQ(rows[3].prefill, 6);
    for (const auto& row : rows) {
        EXPECT_EQ(row.gen, 0);
        EXPECT_EQ(row.gen_tps, 0.0);
    }
}

// --sessions N: N sequences decode together from each frontier; the first decodes exactly the
// single-sequence probe (batching changes nothing for it), and the CSV says N.
TEST_F(BenchCli, SessionsDecodeTogetherAndTheFirstMatchesASingleProbe) {
    auto walk = [&](const char* sessions, const std::string& csv, const std::string& probes) {
        return bench({"--token-ids", ids_file_, "--ctx-start", "32", "--ctx-max", "64", "--step-incr",
                      "32", "--gen-tokens", "6", "--sessions", sessions, "--csv", csv,
                      "--dump-probe-ids", probes});
    };
    const auto one = walk("1", dir_.file("one.csv"), dir_.file("one.txt"));
    ASSERT_EQ(one.exit_code, 0) << one.output;
    const auto four = walk("4", dir_.file("four.csv"), dir_.file("four.txt"));
    ASSERT_EQ(four.exit_code, 0) << four.output;
    const auto rows = read_csv(dir_.file("four.csv"));
    ASSERT_EQ(rows.size(), 2u);
    for (const auto& r : rows) {
        EXPECT_EQ(r.sessions, 4);
        EXPECT_EQ(r.gen, 6);
        EXPECT_TRUE(std::isfinite(r.gen_tps) && r.gen_tps > 0);
    }
    EXPECT_EQ(read_lines(dir_.file("one.txt")), read_lines(dir_.file("four.txt")));
    EXPECT_NE(bench({"--token-ids", ids_file_, "--ctx-start", "32", "--ctx-max", "32", "--sessions", "0"}).exit_code, 0);
}

// Each probe must be exactly the greedy continuation of the frontier's prefix: what `ds4
// --token-ids PREFIX -n N` prints from a fresh session. A probe that leaked into the next
// frontier (a broken restore) or a wrong first token would change the ids.
TEST_F(BenchCli, ProbeIsTheGreedyContinuationOfEachFrontier) {
    const std::string probes = dir_.file("probes.txt");
    const auto r = bench({"--token-ids", ids_file_, "--ctx-start", "32", "--ctx-max", "64",
                          "--step-incr", "16", "--gen-tokens", "5", "--prefill-chunk", "16",
                          "--dump-probe-ids", probes});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto lines = read_lines(probes);
    ASSERT_EQ(lines.size(), 3u);
    const int frontiers[] = {32, 48, 64};
    for (size_t i = 0; i < lines.size(); ++i) {
        const std::string prefix = dir_.file("prefix.txt");
        test::write_token_ids(prefix, {ids_.begin(), ids_.begin() + frontiers[i]});
        const auto ref = run_command({binary("ds4"), "-m", model_, "--token-ids", prefix, "-n",
                                      "5", "--prefill-chunk", "16", "--threads", "2", "--ctx",
                                      "128"});
        ASSERT_EQ(ref.exit_code, 0) << ref.output;
        // ds4's output starts with the ids (its timing line on stderr may follow directly).
        ASSERT_FALSE(lines[i].empty());
        EXPECT_EQ(ref.output.rfind(lines[i], 0), 0u) << "frontier " << frontiers[i] << ": "
                                                      << lines[i] << " vs " << ref.output;
        EXPECT_FALSE(std::isdigit(static_cast<unsigned char>(ref.output[lines[i].size()])))
            << ref.output;
    }
}

// --warmup prefills part of the sequence untimed and resets the session: the rows and probes
// must be those of a run without it (a reset that left the warm-up's tokens in the context
// would shift every frontier's positions and change the greedy ids).
TEST_F(BenchCli, WarmupLeavesTheWalkUnchanged) {
    const auto walk = [&](const std::string& warmup, const std::string& probes) {
        return bench({"--token-ids", ids_file_, "--ctx-start", "32", "--ctx-max", "64",
                      "--step-incr", "16", "--gen-tokens", "5", "--prefill-chunk", "16",
                      "--dump-probe-ids", probes, "--warmup", warmup});
    };
    const auto cold = walk("0", dir_.file("cold.txt"));
    ASSERT_EQ(cold.exit_code, 0) << cold.output;
    const auto warm = walk("40", dir_.file("warm.txt"));
    ASSERT_EQ(warm.exit_code, 0) << warm.output;
    EXPECT_NE(warm.output.find("warm-up 40"), std::string::npos) << warm.output;
    const auto want = read_lines(dir_.file("cold.txt"));
    ASSERT_EQ(want.size(), 3u);
    EXPECT_EQ(read_lines(dir_.file("warm.txt")), want);
}

// --spec-aid D,.. --spec-aid-accept P,..: after each frontier's plain probe, one probe per depth
// and acceptance through speculative verification, from drafts of the known greedy
// continuation. The bench fails unless each decodes exactly the plain probe's tokens, so exit 0
// is verification's promise kept; the counts follow from the depth (all right: ceil(G / (D+1))
// steps; all wrong: one token per step with min(D, tokens left) drafts each), and the CSV and
// table carry the verification columns.
TEST_F(BenchCli, SpecAidVerifiesDraftsAndReportsTheirCounts) {
    struct SpecRow {
        long long ctx = 0, gen = 0, draft = 0, steps = 0, drafted = 0, accepted = 0;
        double gen_tps = 0, accept = 0, rows_per_step = 0, acceptance = 0, tokens_per_step = 0,
               x_plain = 0, cpu_ms = 0;
    };
    const std::string csv = dir_.file("spec.csv"), probes = dir_.file("spec.txt");
    const long long G = 12;
    const auto r = bench({"--token-ids", ids_file_, "--ctx-start", "32", "--ctx-max", "64",
                          "--step-incr", "32", "--gen-tokens", std::to_string(G), "--spec-aid",
                          "1,3", "--spec-aid-accept", "1,0.5,0", "--csv", csv, "--dump-probe-ids",
                          probes});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("x plain"), std::string::npos) << r.output;
    const auto lines = read_lines(csv);
    ASSERT_EQ(lines.size(), 1u + 2 * 7) << r.output;  // per frontier: plain, 2 depths x 3
    EXPECT_EQ(lines[0],
              "ctx_tokens,prefill_tokens,prefill_tps,gen_tokens,gen_tps,kvcache_bytes,sessions,"
              "draft_max,aid_accept,steps,drafted,accepted,drafted_per_step,accepted_per_step,"
              "rows_per_step,acceptance,tokens_per_step,ms_per_step,x_plain,cpu_ms_per_step");
    std::vector<SpecRow> rows;
    for (size_t i = 1; i < lines.size(); ++i) {
        std::vector<std::string> f;
        std::stringstream ss(lines[i]);
        for (std::string c; std::getline(ss, c, ',');) f.push_back(c);
        ASSERT_EQ(f.size(), 20u) << lines[i];
        rows.push_back({.ctx = std::stoll(f[0]), .gen = std::stoll(f[3]), .draft = std::stoll(f[7]),
                        .steps = std::stoll(f[9]), .drafted = std::stoll(f[10]),
                        .accepted = std::stoll(f[11]), .gen_tps = std::stod(f[4]),
                        .accept = std::stod(f[8]), .rows_per_step = std::stod(f[14]),
                        .acceptance = std::stod(f[15]), .tokens_per_step = std::stod(f[16]),
                        .x_plain = std::stod(f[18]), .cpu_ms = std::stod(f[19])});
    }
    const double accepts[] = {1, 0.5, 0};
    for (size_t i = 0; i < rows.size(); ++i) {
        const SpecRow& row = rows[i];
        SCOPED_TRACE(lines[i + 1]);
        const size_t k = i % 7;  // 0: plain; then depth 1 at 1, 0.5, 0; depth 3 at 1, 0.5, 0
        EXPECT_EQ(row.ctx, i < 7 ? 32 : 64);
        EXPECT_EQ(row.gen, G);
        EXPECT_TRUE(std::isfinite(row.gen_tps) && row.gen_tps > 0);
        EXPECT_GT(row.cpu_ms, 0);
        if (k == 0) {
            EXPECT_EQ(row.draft, 0);
            EXPECT_EQ(row.steps, G);
            EXPECT_EQ(row.drafted, 0);
            EXPECT_DOUBLE_EQ(row.x_plain, 1.0);
            continue;
        }
        const long long D = k <= 3 ? 1 : 3;
        const double p = accepts[(k - 1) % 3];
        EXPECT_EQ(row.draft, D);
        EXPECT_DOUBLE_EQ(row.accept, p);
        EXPECT_NEAR(row.x_plain, row.gen_tps / rows[i - k].gen_tps, 1e-3 * row.x_plain + 1e-3);
        EXPECT_NEAR(row.tokens_per_step, double(G) / double(row.steps), 1e-4);
        EXPECT_NEAR(row.rows_per_step, double(row.steps + row.drafted) / double(row.steps), 1e-4);
        if (p == 1) {
            EXPECT_EQ(row.steps, (G + D) / (D + 1));
            EXPECT_EQ(row.accepted, G - row.steps);
            EXPECT_EQ(row.drafted, row.accepted);
            EXPECT_DOUBLE_EQ(row.acceptance, 1.0);
        } else if (p == 0) {
            long long drafted = 0;
            for (long long e = 1; e <= G; ++e) drafted += std::min(D, G - e);
            EXPECT_EQ(row.steps, G);
            EXPECT_EQ(row.drafted, drafted);
            EXPECT_EQ(row.accepted, 0);
        } else {
            EXPECT_GT(row.accepted, 0);
            EXPECT_LT(row.accepted, row.drafted);
            EXPECT_EQ(row.steps + row.accepted, G);  // every step emits its accepted drafts + 1
            EXPECT_NEAR(row.acceptance, double(row.accepted) / double(row.drafted), 1e-4);
        }
    }
    // The probe ids are dumped once per frontier (the verified probes decoded the same), and
    // they are the plain bench's.
    const std::string plain = dir_.file("plain.txt");
    ASSERT_EQ(bench({"--token-ids", ids_file_, "--ctx-start", "32", "--ctx-max", "64", "--step-incr",
                     "32", "--gen-tokens", std::to_string(G), "--dump-probe-ids", plain}).exit_code, 0);
    ASSERT_EQ(read_lines(probes).size(), 2u);
    EXPECT_EQ(read_lines(probes), read_lines(plain));
}

TEST_F(BenchCli, SpecAidRefusesBadSettings) {
    const std::vector<std::string> base = {"--token-ids", ids_file_, "--ctx-start", "32", "--ctx-max", "32"};
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--spec-aid", "0"}, "--spec-aid"},
        {{"--spec-aid", "2", "--spec-aid-accept", "1.5"}, "--spec-aid-accept"},
        {{"--spec-aid-accept", "0.5"}, "--spec-aid"},
        {{"--spec-aid", "2", "--sessions", "2"}, "--spec-aid needs --sessions 1"},
        {{"--spec-aid", "2", "--gen-tokens", "0"}, "--gen-tokens above 0"},
    };
    for (const auto& [extra, message] : cases) {
        auto args = base;
        args.insert(args.end(), extra.begin(), extra.end());
        const auto r = bench(args);
        EXPECT_NE(r.exit_code, 0) << message << "\n" << r.output;
        EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
    }
    const auto help = run_command({binary("ds4-bench"), "--help"});
    ASSERT_EQ(help.exit_code, 0) << help.output;
    for (const char* flag : {"--spec-aid N", "--spec-aid-accept P"})
        EXPECT_NE(help.output.find(flag), std::string::npos) << flag;
}

TEST_F(BenchCli, BadArgumentsFailWithAClearMessage) {
    struct Case {
        std::vector<std::string> args;
        std::string message;
    };
    std::ofstream(dir_.file("bad.txt")) << "1 2 x3\n";
    const std::vector<Case> cases = {
        {{"--ctx-start", "8", "--ctx-max", "16"}, "--prompt-file FILE or --token-ids FILE"},
        {{"--token-ids", ids_file_, "--ctx-start", "64", "--ctx-max", "200"},
         "fewer than the last frontier 200"},
        {{"--token-ids", ids_file_, "--ctx-start", "64", "--ctx-max", "32"},
         "--ctx-max 32 is smaller than --ctx-start 64"},
        {{"--token-ids", ids_file_, "--ctx-start", "0", "--ctx-max", "32"}, "--ctx-start must be positive"},
        {{"--token-ids", ids_file_, "--ctx-start", "8", "--ctx-max", "16", "--step-incr", "0"},
         "--step-incr must be positive"},
        {{"--token-ids", ids_file_, "--ctx-start", "8", "--ctx-max", "16", "--gen-tokens", "8",
          "--ctx", "20"},
         "--ctx 20 is too small"},
        {{"--token-ids", dir_.file("bad.txt"), "--ctx-start", "2", "--ctx-max", "2"},
         "'x3' (token 2) is not a token id"},
        {{"--token-ids", dir_.file("missing.txt"), "--ctx-start", "2", "--ctx-max", "2"},
         "missing.txt"},
        {{"--token-ids", ids_file_, "--prompt-file", ids_file_}, "excludes"},
        {{"--token-ids", ids_file_, "--no-such-flag"}, "no-such-flag"},
    };
    for (const auto& c : cases) {
        const auto r = bench(c.args);
        EXPECT_NE(r.exit_code, 0) << c.message << "\n" << r.output;
        EXPECT_NE(r.output.find(c.message), std::string::npos) << r.output;
    }
    // A token id outside the vocabulary, reported with its position.
    test::write_token_ids(dir_.file("big.txt"), {1, 2, int32_t(n_vocab_)});
    const auto big = bench({"--token-ids", dir_.file("big.txt"), "--ctx-start", "3", "--ctx-max",
                            "3", "--gen-tokens", "1"});
    EXPECT_EQ(big.exit_code, 1);
    EXPECT_NE(big.output.find("token 2 is " + std::to_string(n_vocab_)), std::string::npos)
        << big.output;
    // A model without a vocabulary cannot tokenize --prompt-file text: say so.
    std::ofstream(dir_.file("prompt.txt")) << "hello";
    const auto text = bench({"--prompt-file", dir_.file("prompt.txt"), "--ctx-start", "1",
                             "--ctx-max", "1", "--gen-tokens", "1"});
    EXPECT_EQ(text.exit_code, 1) << text.output;
    EXPECT_NE(text.output.find("ds4-bench: "), std::string::npos) << text.output;
}

TEST_F(BenchCli, HelpDocumentsEveryFlag) {
    const auto r = run_command({binary("ds4-bench"), "--help"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const char* flag : {"--model", "--prompt-file", "--token-ids", "--ctx-start", "--ctx-max",
                             "--step-incr", "--gen-tokens", "--csv", "--threads", "--ctx",
                             "--prefill-chunk", "--no-qat", "--dump-probe-ids", "--warmup", "--profile"})
        EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
}

// bench/plot_speed.py (pure stdlib) draws one marker per row and series.
TEST_F(BenchCli, PlotScriptWritesAValidSvg) {
    if (run_command({"python3", "--version"}).exit_code != 0) GTEST_SKIP() << "no python3";
    const std::string csv = dir_.file("out.csv");
    ASSERT_EQ(bench({"--token-ids", ids_file_, "--ctx-start", "16", "--ctx-max", "64",
                     "--step-incr", "16", "--gen-tokens", "2", "--csv", csv}).exit_code, 0);
    const auto root = std::filesystem::path(DS4_SOURCE_DIR);
    const std::string script = (root / "bench" / "plot_speed.py").string();
    const std::string svg = dir_.file("out.svg");
    const auto r = run_command({"python3", script, csv, "--title", "tiny <test>", "-o", svg});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // Well-formed XML with an svg root (the title's '<' escaped).
    const auto parse = run_command(
        {"python3", "-c",
         "import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); "
         "ns = '{http://www.w3.org/2000/svg}'; assert r.tag == ns + 'svg', r.tag; "
         "print(len(r.findall('.//' + ns + 'circle[@class=\"prefill\"]')), "
         "len(r.findall('.//' + ns + 'circle[@class=\"decode\"]')))",
         svg});
    ASSERT_EQ(parse.exit_code, 0) << parse.output;
    EXPECT_EQ(parse.output, "4 4\n");
    std::ifstream in(svg);
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_NE(ss.str().find("tiny &lt;test&gt;"), std::string::npos);

    // A file that is not a ds4-bench CSV is refused.
    std::ofstream(dir_.file("bad.csv")) << "a,b\n1,2\n";
    const auto bad = run_command({"python3", script, dir_.file("bad.csv"), "-o", svg});
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.output.find("ctx_tokens"), std::string::npos) << bad.output;
}

// decode_bytes --ctx N: below 4 x top-k tokens of context ds4 reads every weight but the
// ratio-4 layers' indexer queries and weights (model/attention.cpp skips them there), above it
// everything; bench/side_by_side.sh turns these bytes into ds4's share of the bandwidth.
TEST_F(BenchCli, DecodeBytesLeavesOutTheIndexerQueriesBelowTopK) {
    const auto file = gguf::File::open(model_);
    const auto cfg = ModelConfig::from_gguf(*file);
    double indexer = 0;
    for (uint32_t l = 0; l < cfg.n_layer; ++l) {
        if (cfg.compress_ratio(l) != 4) continue;
        for (const char* t : {"indexer.attn_q_b.weight", "indexer.proj.weight"})
            indexer += double(file->tensor("blk." + std::to_string(l) + "." + t).n_bytes);
    }
    ASSERT_GT(indexer, 0) << "the tiny preset needs a ratio-4 layer";
    const long long below = 4LL * cfg.indexer_top_k - 1, above = 4LL * cfg.indexer_top_k + 3;
    const auto r = run_command({binary("decode_bytes"), model_, "--ctx", "0", "--ctx",
                                std::to_string(below), "--ctx", std::to_string(above)});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto number_after = [&](const std::string& key) {
        const auto at = r.output.find(key);
        EXPECT_NE(at, std::string::npos) << key << " missing:\n" << r.output;
        return at == std::string::npos ? -1.0 : std::stod(r.output.substr(at + key.size()));
    };
    const double all = number_after("bytes_per_token ");
    EXPECT_GT(all, indexer);
    EXPECT_EQ(number_after("bytes_per_token_at 0 "), all - indexer);
    EXPECT_EQ(number_after("bytes_per_token_at " + std::to_string(below) + " "), all - indexer);
    EXPECT_EQ(number_after("bytes_per_token_at " + std::to_string(above) + " "), all);
    EXPECT_NE(run_command({binary("decode_bytes"), model_, "--ctx", "x"}).exit_code, 0);
}

// --limits: each row says how far it is from the read bandwidth and the int8 peak (given
// here, so the test probes nothing), a step of --sessions N rows reads the first row's bytes
// plus N - 1 rows' routed experts (decode_bytes' counts), and its share of the bandwidth is
// that step x steps/s over the bandwidth.
TEST_F(BenchCli, LimitsPrintEachRowsShareOfBandwidthAndPeak) {
    const std::string csv = dir_.file("out.csv");
    const auto r = bench({"--token-ids", ids_file_, "--ctx-start", "32", "--ctx-max", "32", "--gen-tokens",
                          "3", "--sessions", "2", "--csv", csv, "--limits", "--membw", "0.5",
                          "--int8-peak", "100"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto db = run_command({binary("decode_bytes"), model_, "--ctx", "32"});
    ASSERT_EQ(db.exit_code, 0) << db.output;
    const double step = number_after(db.output, "bytes_per_token_at 32 ") +
                        number_after(db.output, "routed_bytes_per_row ");
    const auto rows = read_csv(csv);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_NE(r.output.find("limits: read bandwidth 0.50 GB/s (--membw)"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("of the int8 peak (100 GOP/s)"), std::string::npos) << r.output;
    const double share = number_after(r.output, "steps/s = ");  // GB/s, then the share
    EXPECT_NEAR(share, step * rows[0].gen_tps / 2 / 1e9, 0.006 + 1e-3 * share) << r.output;
    EXPECT_NE(r.output.find("memory-bound ceiling"), std::string::npos) << r.output;
    // Without --limits, none of it; --membw alone is a usage error.
    const auto plain = bench({"--token-ids", ids_file_, "--ctx-start", "32", "--ctx-max", "32",
                              "--gen-tokens", "1"});
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    EXPECT_EQ(plain.output.find("limits"), std::string::npos) << plain.output;
    EXPECT_NE(bench({"--token-ids", ids_file_, "--membw", "5"}).exit_code, 0);
}

// --profile: under each row, its probe's weight products per format and activation rows per
// call, per step: a step of --sessions 2 runs the dense products on 2 rows, reads the
// non-routed weights once and each row's routed experts (decode_bytes' counts bound the sum).
TEST_F(BenchCli, ProfileSplitsEachStepsProductsByFormatAndRows) {
    const auto r = bench({"--token-ids", ids_file_, "--ctx-start", "32", "--ctx-max", "32", "--gen-tokens",
                          "4", "--sessions", "2", "--profile"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto db = run_command({binary("decode_bytes"), model_, "--ctx", "32"});
    ASSERT_EQ(db.exit_code, 0) << db.output;
    const double one_row = number_after(db.output, "bytes_per_token_at 32 ");
    const double routed = number_after(db.output, "routed_bytes_per_row ");
    ASSERT_NE(r.output.find("profile of the probe, per step"), std::string::npos) << r.output;
    double mb = 0;
    int two_row_lines = 0, lines = 0;
    std::istringstream in(r.output);
    for (std::string l; std::getline(in, l);) {
        char fmt[32];
        int rows = 0;
        double mb_step = 0, ms = 0;
        if (std::sscanf(l.c_str(), " | %31s | %d | %lf | %lf |", fmt, &rows, &mb_step, &ms) != 4) continue;
        ++lines;
        EXPECT_TRUE(rows == 1 || rows == 2) << l;  // experts one row each or shared; dense 2
        two_row_lines += rows == 2;
        mb += mb_step;
        EXPECT_GE(ms, 0.0) << l;
    }
    EXPECT_GE(lines, 2) << r.output;
    EXPECT_GE(two_row_lines, 1) << r.output;
    // Products only (no norms, no embedding row): a little under one row's bytes, at most one
    // more row's experts.
    EXPECT_GT(1e6 * mb, 0.8 * one_row) << r.output;
    EXPECT_LT(1e6 * mb, one_row + routed + 1e5) << r.output;
    EXPECT_NE(r.output.find("parallel regions per step"), std::string::npos) << r.output;
    // Without --profile, no table.
    const auto plain = bench({"--token-ids", ids_file_, "--ctx-start", "32", "--ctx-max", "32",
                              "--gen-tokens", "1"});
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    EXPECT_EQ(plain.output.find("profile of the probe"), std::string::npos) << plain.output;
}

}  // namespace
}  // namespace ds4::deepseek4

namespace ds4::deepseek4 {
namespace {

// ds4-bench --mtp / --dspark: one more probe per frontier with the real drafter, primed with
// the frontier's last rows, checked against plain greedy decoding; its row has aid_accept -1.
TEST(BenchCliDrafter, RealDraftersAddAVerifiedProbePerFrontier) {
    test::TempDir dir;
    const std::string model = dir.file("m.gguf"), mtp = dir.file("mtp.gguf"), dspark = dir.file("dspark.gguf");
    ASSERT_EQ(test::run_command({test::binary("ds4-gguf-gen"), "-q", "-o", model, "--preset", "tiny", "--seed", "4",
                                 "--mtp-out", mtp, "--dspark-out", dspark}).exit_code, 0);
    const std::string ids = dir.file("ids.txt");
    test::write_token_ids(ids, test::random_token_ids(100, Model::load(model)->config().n_vocab, 6));
    for (const std::vector<std::string>& drafter :
         {std::vector<std::string>{"--mtp", mtp, "--mtp-draft", "3", "--mtp-margin", "0"},
          std::vector<std::string>{"--mtp", dspark, "--dspark", "--dspark-confidence", "0"}}) {
        const std::string csv = dir.file("d.csv");
        std::vector<std::string> argv = {test::binary("ds4-bench"), "-m", model, "--threads", "2", "--token-ids", ids,
                                         "--ctx-start", "32", "--ctx-max", "64", "--step-incr", "32", "--gen-tokens",
                                         "16", "--csv", csv};
        argv.insert(argv.end(), drafter.begin(), drafter.end());
        const auto r = test::run_command(argv);
        ASSERT_EQ(r.exit_code, 0) << r.output;
        EXPECT_NE(r.output.find("speculative decoding: "), std::string::npos) << r.output;
        const auto lines = read_lines(csv);
        ASSERT_EQ(lines.size(), 1u + 2 * 2) << r.output;  // per frontier: plain, the drafter
        for (size_t i : {2u, 4u}) {
            std::vector<std::string> f;
            std::stringstream ss(lines[i]);
            for (std::string c; std::getline(ss, c, ',');) f.push_back(c);
            ASSERT_EQ(f.size(), 20u) << lines[i];
            EXPECT_EQ(std::stod(f[8]), -1.0) << lines[i];  // aid_accept: the real drafter
            EXPECT_GT(std::stoll(f[7]), 0) << lines[i];     // draft_max
        }
    }
    // Refused with several sessions per probe.
    const auto bad = test::run_command({test::binary("ds4-bench"), "-m", model, "--token-ids", ids, "--ctx-start",
                                        "32", "--ctx-max", "32", "--gen-tokens", "8", "--sessions", "2", "--mtp", mtp});
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.output.find("--sessions 1"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace ds4::deepseek4
