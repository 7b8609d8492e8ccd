// Smoke test of ds4-peer-bench (bench/peer_bench.cpp), the llama.cpp side of the side-by-side
// benchmark: on a generated tiny model it walks the same frontiers as ds4-bench and writes
// the same CSV columns, and its decode probe is undone (llama_state_seq_set_data) so that a
// later frontier's probe equals that of a fresh walk starting there. Then bench/side_by_side.sh
// end to end (--quick, both engines, the probe, the summary) on the same kind of model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "model/deepseek4/model.h"
#include "support/tool_run.h"

namespace ds4::oracle {

using namespace ds4::test;  // the helpers of tests/support
namespace {

std::vector<std::string> read_lines(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
}

TEST(PeerBench, WalksTheFrontiersAndRestoresAfterEachProbe) {
    if (!std::filesystem::exists(binary("ds4-peer-bench")))
        GTEST_SKIP() << "ds4-peer-bench not built (bench/ needs the oracle)";
    TempDir dir;
    const std::string model = dir.file("tiny.gguf");
    ASSERT_EQ(run_command({binary("ds4-gguf-gen"), "-q", "-o", model, "--preset", "tiny",
                           "--seed", "3"}).exit_code, 0);
    const int64_t V = deepseek4::Model::load(model)->config().n_vocab;
    write_token_ids(dir.file("ids.txt"), random_token_ids(64, V, 11));

    const auto walk = [&](const std::string& start, const std::string& csv,
                          const std::string& probes, const std::string& warmup = "0") {
        return run_command({binary("ds4-peer-bench"), "-m", model, "--token-ids",
                            dir.file("ids.txt"), "--ctx-start", start, "--ctx-max", "48",
                            "--step-incr", "16", "--gen-tokens", "4", "--threads", "2", "--csv",
                            csv, "--dump-probe-ids", probes, "--warmup", warmup});
    };
    const auto r = walk("16", dir.file("a.csv"), dir.file("a.txt"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto csv = read_lines(dir.file("a.csv"));
    ASSERT_EQ(csv.size(), 4u) << r.output;
    EXPECT_EQ(csv[0], "ctx_tokens,prefill_tokens,prefill_tps,gen_tokens,gen_tps,kvcache_bytes,sessions");
    EXPECT_EQ(csv[1].rfind("16,16,", 0), 0u) << csv[1];
    EXPECT_EQ(csv[2].rfind("32,16,", 0), 0u) << csv[2];
    EXPECT_EQ(csv[3].rfind("48,16,", 0), 0u) << csv[3];

    // A fresh walk from 48 must decode what the first walk decoded there after two restores.
    const auto fresh = walk("48", dir.file("b.csv"), dir.file("b.txt"));
    ASSERT_EQ(fresh.exit_code, 0) << fresh.output;
    const auto probes = read_lines(dir.file("a.txt")), fresh_probes = read_lines(dir.file("b.txt"));
    ASSERT_EQ(probes.size(), 3u);
    ASSERT_EQ(fresh_probes.size(), 1u);
    EXPECT_EQ(probes[2], fresh_probes[0]);

    // A warm-up leaves nothing behind: the walk decodes the same ids after it (without the
    // memory cleared, the walk would run at positions 40 and up, on a different context).
    const auto warm = walk("16", dir.file("c.csv"), dir.file("c.txt"), "40");
    ASSERT_EQ(warm.exit_code, 0) << warm.output;
    EXPECT_EQ(read_lines(dir.file("c.txt")), probes);

    const auto bad = run_command({binary("ds4-peer-bench"), "-m", model, "--token-ids",
                                  dir.file("ids.txt"), "--ctx-start", "16", "--ctx-max", "100"});
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.output.find("fewer than the last frontier 100"), std::string::npos) << bad.output;
}

// The side-by-side script on a tiny model with the binaries of this build: a table of medians
// for the 512-token case, a ratio per row, the bandwidth lines, and each engine's CSV with its
// warm-up in the log (so flag changes in either bench that break the script fail here).
TEST(PeerBench, SideBySideScriptRunsEndToEnd) {
    if (!std::filesystem::exists(binary("ds4-peer-bench")))
        GTEST_SKIP() << "ds4-peer-bench not built (bench/ needs the oracle)";
    TempDir dir;
    const std::string model = dir.file("tiny.gguf");
    ASSERT_EQ(run_command({binary("ds4-gguf-gen"), "-q", "-o", model, "--preset", "tiny",
                           "--seed", "5"}).exit_code, 0);
    const std::string out = dir.file("run");
    const std::string build = std::filesystem::path(binary("ds4")).parent_path().parent_path();
    const std::string script = (std::filesystem::path(DS4_SOURCE_DIR) / "bench" / "side_by_side.sh").string();
    const auto r = run_command({"bash", script,
                                "--quick", "--no-build", "--build", build, "--model", model,
                                "--reps", "1", "--gen-tokens", "4", "--batch", "256",
                                "--probe-mib", "128", "--out", out});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto summary = read_lines(out + "/summary.md");
    std::string all;
    for (const auto& l : summary) all += l + "\n";
    for (const char* row : {"| prefill t/s, 512-token prompt |", "| decode t/s at context 512 |"}) {
        const auto at = all.find(row);
        ASSERT_NE(at, std::string::npos) << row << " missing:\n" << all;
        const std::string line = all.substr(at, all.find('\n', at) - at);
        // The last two cells are the ratio of the medians and the paired ratio (with one
        // repetition, the same number): positive.
        std::vector<std::string> cells;
        for (size_t i = 1, j; (j = line.find('|', i)) != std::string::npos; i = j + 1)
            cells.push_back(line.substr(i, j - i));
        ASSERT_EQ(cells.size(), 5u) << line;
        EXPECT_GT(std::stod(cells[3]), 0.0) << line;
        EXPECT_DOUBLE_EQ(std::stod(cells[3]), std::stod(cells[4])) << line;
    }
    // The per-repetition table: the repetition's own probe and its decode ratio.
    EXPECT_NE(all.find("| rep | probe GB/s | decode at 512 |"), std::string::npos) << all;
    EXPECT_NE(all.find("| 1 | "), std::string::npos) << all;
    EXPECT_NE(all.find("memory read bandwidth"), std::string::npos) << all;
    EXPECT_NE(all.find("decode at context 512 streams"), std::string::npos) << all;
    // Prefill against the int8 peak (membw_probe --int8-peak, decode_bytes' ops per token).
    EXPECT_NE(all.find("- prefill of a 512-token prompt runs the weight products at "), std::string::npos) << all;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw")) {
        EXPECT_NE(all.find("- int8 peak "), std::string::npos) << all;
        EXPECT_NE(all.find("% of the int8 peak)"), std::string::npos) << all;
    }
    for (const char* engine : {"ds4", "llama"}) {
        const auto csv = read_lines(out + "/" + engine + "-512-r1.csv");
        ASSERT_EQ(csv.size(), 2u) << engine;
        EXPECT_EQ(csv[1].rfind("512,512,", 0), 0u) << engine << ": " << csv[1];
    }
    std::ifstream log(out + "/ds4-512-r1.log");
    const std::string ds4_log((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    EXPECT_NE(ds4_log.find("warm-up 256"), std::string::npos) << ds4_log;
}

}  // namespace
}  // namespace ds4::oracle
