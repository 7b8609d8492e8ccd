// SSD streaming of routed experts (src/streaming, docs/SSD_STREAMING.md): a model opened with
// stream_experts and served by the expert cache gives exactly (bit for bit) the resident logits
// for every cache size from one token's experts (n_expert_used slots) to all of them, for
// prefill in several chunk sizes and for decode, with two quant mixes of the routed experts;
// the cache never holds more than its slots; the experts are never read into memory by the
// load; a file that shrinks under a running model is a clear error; the CLI's --ssd-streaming
// dump equals the resident one byte for byte and bad budgets are usage errors.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/deepseek4/model.h"
#include "model/session.h"
#include "streaming/expert_cache.h"
#include "streaming/profile.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4::deepseek4 {
namespace {

// The tiny preset (6 layers, 8 experts of ff 256, 2 used, hash layers 0-2) with its routed
// experts in the published q2 recipe (iq2_xxs gate/up, q2_k down) or in q4_k.
const std::vector<std::pair<std::string, std::vector<std::string>>>& quant_mixes() {
    static const std::vector<std::pair<std::string, std::vector<std::string>>> mixes = {
        {"q2", {"--type", "gate_up_exps=iq2_xxs", "--type", "down_exps=q2_k", "--type", "dense=q8_0"}},
        {"q4", {"--type", "exps=q4_k", "--type", "shared=q8_0"}},
    };
    return mixes;
}

std::string write_model(const test::TempDir& dir, const std::string& name, const std::vector<std::string>& types) {
    const std::string p = dir.file(name + ".gguf");
    std::vector<std::string> argv = {test::binary("ds4-gguf-gen"), "-q", "-o", p, "--preset", "tiny", "--seed", "5"};
    argv.insert(argv.end(), types.begin(), types.end());
    const auto r = test::run_command(argv);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return p;
}

void expect_bit_identical(const std::vector<float>& a, const std::vector<float>& b, int64_t V, const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            ADD_FAILURE() << what << ": position " << i / size_t(V) << " logit " << i % size_t(V) << ": "
                          << a[i] << " resident, " << b[i] << " streamed";
            return;
        }
}

// Logits of every position: prefill of `ids` in chunks of `chunk`, then `decode` greedy steps
// one token at a time (their logits appended).
std::vector<float> run(model::Model& m, const std::vector<int32_t>& ids, int64_t chunk, int decode) {
    const int64_t V = m.info().n_vocab;
    model::Session s(m, {.ctx = 128, .prefill_chunk = chunk});
    std::vector<float> all;
    s.eval(ids, &all, true);
    for (int i = 0; i < decode; ++i) {
        const float* last = all.data() + all.size() - size_t(V);
        const int32_t next = int32_t(std::max_element(last, last + V) - last);
        std::vector<float> l;
        s.eval({next}, &l);
        all.insert(all.end(), l.begin(), l.end());
    }
    return all;
}

TEST(SsdStreaming, LogitsBitIdenticalForEveryBudgetChunkSizeAndQuantMix) {
    test::TempDir dir;
    for (const auto& [name, types] : quant_mixes()) {
        const std::string path = write_model(dir, name, types);
        auto resident = Model::load(path, {.threads = 2});
        const int64_t V = resident->config().n_vocab, E = resident->config().n_expert;
        const int64_t K = resident->config().n_expert_used, L = resident->config().n_layer;
        const auto ids = test::random_token_ids(40, V, 9);
        const std::vector<float> expected = run(*resident, ids, 40, 4);

        auto streamed = Model::load(path, {.threads = 2, .stream_experts = true});
        for (int64_t slots : {K, K + 1, E - 1, E, 2 * E + 3, E * L}) {
            for (int64_t chunk : {1, 7, 40}) {
                auto cache = std::make_shared<streaming::ExpertCache>(streamed->expert_layout(),
                                                                      streaming::CacheOptions{.slots = slots, .io_threads = 3});
                streamed->set_expert_source(cache);
                const std::string what = fmt::format("{} experts, {} slots, chunk {}", name, slots, chunk);
                expect_bit_identical(expected, run(*streamed, ids, chunk, 4), V, what);
                const streaming::CacheStats& st = cache->stats();
                EXPECT_LE(st.max_occupied, slots) << what;
                EXPECT_GT(st.misses, 0u) << what;
                // One quant mix per file: every expert has the same size.
                EXPECT_EQ(st.bytes_read, (st.misses + st.read_ahead) * cache->expert_bytes()) << what;
                // Prompt chunks read the next layer ahead when two layers fit; decode never.
                const uint64_t prompt_ahead = st.read_ahead - st.hinted;
                if (slots >= 2 * E && chunk * K >= 2 * E) {
                    EXPECT_GT(prompt_ahead, 0u) << what;
                }
                if (slots < 2 * E || chunk * K < 2 * E) {
                    EXPECT_EQ(prompt_ahead, 0u) << what;
                }
                // Decode steps (and 1-token chunks) read the next layer's forecast experts when
                // there is room beside the current layer's; with only K slots there never is.
                EXPECT_LE(st.hint_used, st.hinted) << what;
                if (slots >= E && slots < E * L) {
                    EXPECT_GT(st.hinted, 0u) << what;
                }
                if (slots == K) {
                    EXPECT_EQ(st.hinted, 0u) << what;
                }
                if (slots == E * L) {
                    // Everything fits: each expert is read at most once, nothing is evicted.
                    EXPECT_EQ(st.evictions, 0u) << what;
                    EXPECT_LE(int64_t(st.misses + st.read_ahead), E * L) << what;
                    EXPECT_GT(st.hits, 0u) << what;
                } else if (slots == K) {
                    EXPECT_GT(st.evictions, 0u) << what;
                }
            }
        }
    }
}

TEST(SsdStreaming, TheLoadNeverReadsTheRoutedExperts) {
    test::TempDir dir;
    const std::string path = write_model(dir, "q4", quant_mixes()[1].second);
    auto m = Model::load(path, {.threads = 2, .stream_experts = true});
    int64_t routed = 0, kept = 0;
    for (const gguf::TensorInfo& t : m->file().tensors()) {
        const bool is_routed = t.name.find("_exps.weight") != std::string::npos;
        EXPECT_EQ(m->file().holds(t), !is_routed) << t.name;
        (is_routed ? routed : kept) += 1;
    }
    EXPECT_EQ(routed, 3 * int64_t(m->config().n_layer));
    EXPECT_GT(kept, 0);
    for (const LayerWeights& L : m->weights().layers) EXPECT_EQ(L.gate_exps.all.data, nullptr);
    // Without an expert source there is nothing to run the experts with: an error, not zeros.
    model::Session s(*m, {.ctx = 16});
    std::vector<float> l;
    try {
        s.eval({1, 2, 3}, &l);
        ADD_FAILURE() << "evaluated without experts";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("no expert source"), std::string::npos) << e.what();
    }
    // The layer identity hashes read the expert tensors' ends from the disk: the same as a
    // resident load's (a saved state moves between the two).
    auto resident = Model::load(path, {.threads = 1});
    for (uint32_t il = 0; il < m->config().n_layer; ++il) EXPECT_EQ(m->layer_hash(il), resident->layer_hash(il)) << il;
}

TEST(SsdStreaming, AFileTruncatedInsideAnExpertIsAClearError) {
    test::TempDir dir;
    const std::string path = write_model(dir, "q4", quant_mixes()[1].second);
    auto m = Model::load(path, {.threads = 2, .stream_experts = true});
    const model::ExpertFileLayout layout = m->expert_layout();
    // Cut the file in the middle of layer 1's gate tensor, right inside expert 3.
    const auto& gate = layout.layers[1].parts[0];
    const uint64_t cut = gate.offset + 3 * gate.expert_bytes + gate.expert_bytes / 2;
    auto cache = std::make_shared<streaming::ExpertCache>(layout, streaming::CacheOptions{.slots = 48});
    m->set_expert_source(cache);
    std::filesystem::resize_file(path, cut);
    const auto ids = test::random_token_ids(40, m->config().n_vocab, 2);
    for (int attempt = 0; attempt < 2; ++attempt) {  // the second call fails the same way, no hang
        model::Session s(*m, {.ctx = 64, .prefill_chunk = 40});
        std::vector<float> l;
        try {
            s.eval(ids, &l);
            ADD_FAILURE() << "evaluated a truncated file";
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find(path), std::string::npos) << msg;
            EXPECT_NE(msg.find("layer 1 expert"), std::string::npos) << msg;
            EXPECT_NE(msg.find("unexpected end of file"), std::string::npos) << msg;
        }
    }
    EXPECT_LE(cache->stats().max_occupied, 48);
}

TEST(SsdStreamingCli, DumpEqualsTheResidentDumpByteForByte) {
    test::TempDir dir;
    const std::string path = write_model(dir, "q2", quant_mixes()[0].second);
    test::write_token_ids(dir.file("ids.txt"), test::random_token_ids(30, 512, 4));
    auto ds4 = [&](const std::string& out, std::vector<std::string> extra) {
        std::vector<std::string> argv = {test::binary("ds4"), "-m", path, "--token-ids", dir.file("ids.txt"),
                                         "--dump-logits-f32", dir.file(out), "-n", "3", "--threads", "2",
                                         "--ctx", "64", "--prefill-chunk", "8"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        return test::run_command(argv);
    };
    auto bytes = [&](const std::string& name) {
        std::ifstream in(dir.file(name), std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const auto res = ds4("resident.f32", {});
    ASSERT_EQ(res.exit_code, 0) << res.output;
    const auto st = ds4("streamed.f32", {"--ssd-streaming", "--ssd-streaming-cache-experts", "2",
                                         "--expert-profile", dir.file("profile.json")});
    ASSERT_EQ(st.exit_code, 0) << st.output;
    EXPECT_EQ(bytes("resident.f32"), bytes("streamed.f32"));
    // The same greedy continuation, the startup and the end-of-run lines.
    const std::string continuation = res.output.substr(0, res.output.find("prefill:"));
    ASSERT_FALSE(continuation.empty()) << res.output;
    EXPECT_NE(st.output.find(continuation), std::string::npos) << continuation << "\n" << st.output;
    EXPECT_NE(st.output.find("ssd streaming: expert cache requested 2, effective"), std::string::npos) << st.output;
    EXPECT_NE(st.output.find("(2 experts of"), std::string::npos) << st.output;
    EXPECT_NE(st.output.find("hit rate"), std::string::npos) << st.output;
    EXPECT_NE(st.output.find("at most 2 of 2 slots used"), std::string::npos) << st.output;

    // The profile: every layer's counts sum to tokens x n_expert_used; its simulation at 2 slots
    // repeats the real cache's misses.
    const auto hot = streaming::hottest_experts(dir.file("profile.json"), 6, 8, -1);
    EXPECT_GT(hot.size(), 6u);
    const auto profile = nlohmann::json::parse(bytes("profile.json"));
    EXPECT_EQ(profile["format"], "ds4-expert-profile");
    EXPECT_EQ(profile["tokens"], 32);  // 30 + 2 decoded
    ASSERT_EQ(profile["layers"].size(), 6u);
    for (const auto& L : profile["layers"]) {
        int64_t sum = 0;
        for (const auto& c : L["counts"]) sum += c.get<int64_t>();
        EXPECT_EQ(sum, 64) << L["layer"];
        EXPECT_EQ(L["routes"], 64);
    }
    std::smatch real;
    ASSERT_TRUE(std::regex_search(st.output, real, std::regex(R"((\d+) expert hits, (\d+) misses)"))) << st.output;
    bool simulated_two = false;
    for (const auto& r : profile["simulation"]["results"])
        if (r["slots"] == 2) {
            simulated_two = true;
            EXPECT_EQ(r["hits"].get<int64_t>(), std::stoll(real[1])) << st.output;
            EXPECT_EQ(r["misses"].get<int64_t>(), std::stoll(real[2])) << st.output;
        }
    EXPECT_TRUE(simulated_two);
    // A resident run profiles the same routing.
    const auto plain = ds4("plain.f32", {"--expert-profile", dir.file("resident.json")});
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    EXPECT_EQ(plain.output.find("ssd streaming:"), std::string::npos) << plain.output;
    EXPECT_EQ(nlohmann::json::parse(bytes("resident.json"))["layers"], profile["layers"]);

    // Preload from the profile: the auto budget (the whole model fits) is seeded with every
    // routed expert, so the run reads nothing more; --ssd-streaming-cold skips it.
    const auto pre = ds4("preloaded.f32", {"--ssd-streaming", "--ssd-streaming-preload", dir.file("profile.json")});
    ASSERT_EQ(pre.exit_code, 0) << pre.output;
    EXPECT_EQ(bytes("resident.f32"), bytes("preloaded.f32"));
    EXPECT_NE(pre.output.find(fmt::format("preloaded {} experts", hot.size())), std::string::npos) << pre.output;
    EXPECT_NE(pre.output.find(" 0 misses"), std::string::npos) << pre.output;
    const auto cold = ds4("cold.f32", {"--ssd-streaming", "--ssd-streaming-preload", dir.file("profile.json"),
                                       "--ssd-streaming-cold", "--ssd-streaming-cache-experts", "1MB"});
    ASSERT_EQ(cold.exit_code, 0) << cold.output;
    EXPECT_EQ(bytes("resident.f32"), bytes("cold.f32"));
    EXPECT_NE(cold.output.find("cold start"), std::string::npos) << cold.output;
    EXPECT_EQ(cold.output.find(" 0 misses"), std::string::npos) << cold.output;
}

// Runs argv with output discarded; returns the process's peak resident memory in bytes (-1 when
// it did not exit with 0).
int64_t peak_rss_of(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        const int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execv(args[0], args.data());
        _exit(127);
    }
    int status = 0;
    rusage ru{};
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    return int64_t(ru.ru_maxrss) * 1024;
}

TEST(SsdStreamingCli, ResidentMemoryStaysBelowTheNonRoutedWeightsPlusTheCache) {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "AddressSanitizer's shadow memory inflates the resident size";
#endif
    // 64 experts of ff 1024 (q4_k) per layer: the routed experts are ~94% of the file.
    test::TempDir dir;
    const std::string path = dir.file("experts.gguf");
    const auto gen = test::run_command({test::binary("ds4-gguf-gen"), "-q", "-o", path, "--preset", "tiny",
                                          "--experts", "64", "--ff", "1024", "--type", "exps=q4_k", "--type",
                                          "dense=q8_0", "--type", "shared=q8_0"});
    ASSERT_EQ(gen.exit_code, 0) << gen.output;
    test::write_token_ids(dir.file("ids.txt"), test::random_token_ids(64, 512, 6));
    int64_t expert_bytes = 0;
    {
        auto m = Model::load(path, {.threads = 1, .stream_experts = true});
        for (const auto& L : m->expert_layout().layers) expert_bytes += int64_t(L.expert_bytes()) * 64;
    }
    const int64_t file_bytes = int64_t(std::filesystem::file_size(path));
    ASSERT_GT(expert_bytes, file_bytes * 9 / 10);
    const std::vector<std::string> base = {test::binary("ds4"), "-m", path, "--token-ids", dir.file("ids.txt"),
                                           "-n", "4", "--threads", "2", "--ctx", "128"};
    auto with = [&](std::vector<std::string> extra) {
        std::vector<std::string> argv = base;
        argv.insert(argv.end(), extra.begin(), extra.end());
        return peak_rss_of(argv);
    };
    const int64_t resident = with({"--no-mmap"});
    const int64_t streamed = with({"--ssd-streaming", "--ssd-streaming-cache-experts", "4"});
    ASSERT_GT(resident, 0);
    ASSERT_GT(streamed, 0);
    // The resident run holds the experts; the streamed one holds the rest of the file, four
    // slots (under 2 MiB here), KV, scratch and the binary: a 64 MiB margin, far below the
    // 170 MB of experts.
    EXPECT_GT(resident, expert_bytes);
    EXPECT_LT(streamed, file_bytes - expert_bytes + (int64_t(64) << 20))
        << "resident " << resident << ", streamed " << streamed << ", experts " << expert_bytes;
}

TEST(SsdStreamingCli, BenchAndServerTakeTheSameFlags) {
    test::TempDir dir;
    const std::string path = write_model(dir, "q4", quant_mixes()[1].second);
    test::write_token_ids(dir.file("ids.txt"), test::random_token_ids(48, 512, 8));
    // ds4-bench: the same greedy probes resident and streamed (a 2-expert cache), and the
    // cache's lines on stderr.
    auto bench = [&](const std::string& probes, std::vector<std::string> extra) {
        std::vector<std::string> argv = {test::binary("ds4-bench"), "-m", path, "--token-ids", dir.file("ids.txt"),
                                         "--ctx-start", "16", "--ctx-max", "48", "--step-incr", "16",
                                         "--gen-tokens", "4", "--threads", "2", "--dump-probe-ids", dir.file(probes)};
        argv.insert(argv.end(), extra.begin(), extra.end());
        return test::run_command(argv);
    };
    const auto res = bench("resident.txt", {});
    ASSERT_EQ(res.exit_code, 0) << res.output;
    const auto st = bench("streamed.txt", {"--ssd-streaming", "--ssd-streaming-cache-experts", "2"});
    ASSERT_EQ(st.exit_code, 0) << st.output;
    auto text = [&](const std::string& name) {
        std::ifstream in(dir.file(name));
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    EXPECT_FALSE(text("resident.txt").empty());
    EXPECT_EQ(text("resident.txt"), text("streamed.txt"));
    EXPECT_NE(st.output.find("ssd streaming: expert cache requested 2"), std::string::npos) << st.output;
    EXPECT_NE(st.output.find("at most 2 of 2 slots used"), std::string::npos) << st.output;
    // ds4-server (a model with a vocabulary): the flags parse and the budget is checked against
    // the model after the load.
    const std::string vocab_model = dir.file("tiny-vocab.gguf");
    const auto gen = test::write_tiny_model(vocab_model, test::kTinyQ8Io);
    ASSERT_EQ(gen.exit_code, 0) << gen.output;
    const auto srv = test::run_command({test::binary("ds4-server"), "-m", vocab_model, "--port", "0",
                                          "--ssd-streaming", "--ssd-streaming-cache-experts", "1"});
    EXPECT_EQ(srv.exit_code, 1) << srv.output;
    EXPECT_NE(srv.output.find("ds4-server: --ssd-streaming-cache-experts 1: at least 2 experts are needed"),
              std::string::npos) << srv.output;
    const auto usage = test::run_command({test::binary("ds4-server"), "-m", path, "--ssd-streaming-cold"});
    EXPECT_EQ(usage.exit_code, 2) << usage.output;
    EXPECT_NE(usage.output.find("need --ssd-streaming"), std::string::npos) << usage.output;
}

TEST(SsdStreamingCli, BadBudgetsAreClearErrors) {
    test::TempDir dir;
    const std::string path = write_model(dir, "q4", quant_mixes()[1].second);
    test::write_token_ids(dir.file("ids.txt"), {1, 2, 3});
    struct Case {
        std::vector<std::string> flags;
        std::string message;
    };
    const std::vector<Case> cases = {
        {{"--ssd-streaming", "--ssd-streaming-cache-experts", "0"}, "at least one expert"},
        {{"--ssd-streaming", "--ssd-streaming-cache-experts", "12TB"}, "expected a number of experts"},
        {{"--ssd-streaming", "--ssd-streaming-cache-experts", "-4"}, "expected a number of experts"},
        {{"--ssd-streaming", "--ssd-streaming-cache-experts", "1.5"}, "expected a number of experts"},
        {{"--ssd-streaming", "--ssd-streaming-cache-experts", "1"}, "at least 2 experts are needed"},
        {{"--ssd-streaming", "--ssd-streaming-cache-experts", "0.1MB"}, "at least 2 are needed"},
        {{"--ssd-streaming", "--ssd-streaming-cache-experts", "100000000GB"}, "of memory is available"},
        {{"--ssd-streaming-cache-experts", "4"}, "need --ssd-streaming"},
        {{"--ssd-streaming", "--ssd-streaming-preload-experts", "4"}, "needs --ssd-streaming-preload FILE"},
        {{"--ssd-streaming", "--ssd-streaming-preload", dir.file("ids.txt")}, "not an expert profile"},
    };
    for (const Case& c : cases) {
        std::vector<std::string> argv = {test::binary("ds4"), "-m", path, "--token-ids", dir.file("ids.txt")};
        argv.insert(argv.end(), c.flags.begin(), c.flags.end());
        const auto r = test::run_command(argv);
        EXPECT_NE(r.exit_code, 0) << c.message;
        EXPECT_NE(r.output.find(c.message), std::string::npos) << c.message << "\n" << r.output;
    }
}

}  // namespace
}  // namespace ds4::deepseek4
