// GLM 5.2 in the front ends (issue 32 items 1 and 6) on ds4-gguf-gen's GLM tiny preset (random
// weights, a glm4-style vocabulary): ds4's one-shot reply ends at the chat format's stop ids
// (not only EOS), unset sampling flags take the format's defaults (top-p 0.95, min-p 0),
// --inspect, the interactive chat's /nothink, /save and /load; SSD streaming leaves the dense
// leading layers out and equals the resident logits bit for bit, with and without
// --ssd-streaming-full-layers; ds4-bench's rows and probes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "chat/format.h"
#include "gguf/reader.h"
#include "model/model.h"
#include "model/session.h"
#include "streaming/expert_cache.h"
#include "streaming/full_layers.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"
#include "tokenizer/tokenizer.h"

namespace ds4::glm {
namespace {

std::string read_file(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

struct Split {
    int exit_code;
    std::string out, err;
};

std::vector<int32_t> ids_of(const std::string& text) {
    std::istringstream in(text);
    std::vector<int32_t> ids;
    for (int32_t v; in >> v;) ids.push_back(v);
    return ids;
}

class GlmFrontends : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        model_ = test::generate_model(*dir_, "glm-tiny.gguf", {"--arch", "glm-dsa", "--seed", "3"});
        q4_ = test::generate_model(*dir_, "glm-q4.gguf", {"--arch", "glm-dsa", "--seed", "4", "--layers", "4",
                                                          "--indexer-types", "1,0,1,0", "--type", "exps=q4_k"});
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }

    // Runs `bin` with stdout and stderr captured separately (stdin: `input` when given).
    static Split run(const std::string& bin, const std::vector<std::string>& args, const std::string& input = {}) {
        std::string cmd = "exec " + quote(test::binary(bin));
        for (const auto& a : args) cmd.append(" ").append(quote(a));
        if (!input.empty()) {
            std::ofstream(dir_->file("in.txt")) << input;
            cmd.append(" <").append(quote(dir_->file("in.txt")));
        }
        cmd.append(" >").append(quote(dir_->file("out.txt")));
        cmd.append(" 2>").append(quote(dir_->file("err.txt")));
        const auto r = test::run_command({"/bin/sh", "-c", cmd});
        return {r.exit_code, read_file(dir_->file("out.txt")), read_file(dir_->file("err.txt"))};
    }
    static Split ds4(std::vector<std::string> args, const std::string& model = {}) {
        args.insert(args.begin(), {"-m", model.empty() ? model_ : model, "--threads", "2"});
        return run("ds4", args);
    }

    static test::TempDir* dir_;
    static std::string model_, q4_;
};
test::TempDir* GlmFrontends::dir_ = nullptr;
std::string GlmFrontends::model_, GlmFrontends::q4_;

// Swaps two rows of the F32 output head of a copy of `from` (the greedy choice between the
// two tokens swaps; every other logit stays).
void swap_output_rows(const std::string& from, const std::string& to, int32_t a, int32_t b) {
    std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
    auto f = gguf::File::open(from);
    const gguf::TensorInfo& t = f->tensor("output.weight");
    ASSERT_EQ(t.type, TensorType::F32);
    const uint64_t row = uint64_t(t.ne[0]) * 4, base = f->data_offset() + t.offset;
    std::fstream io(to, std::ios::in | std::ios::out | std::ios::binary);
    std::string ra(row, '\0'), rb(row, '\0');
    io.seekg(std::streamoff(base + uint64_t(a) * row));
    io.read(ra.data(), std::streamsize(row));
    io.seekg(std::streamoff(base + uint64_t(b) * row));
    io.read(rb.data(), std::streamsize(row));
    io.seekp(std::streamoff(base + uint64_t(a) * row));
    io.write(rb.data(), std::streamsize(row));
    io.seekp(std::streamoff(base + uint64_t(b) * row));
    io.write(ra.data(), std::streamsize(row));
    ASSERT_TRUE(io.good());
}

TEST_F(GlmFrontends, OneShotReplyEndsAtTheFormatsStopIds) {
    // The greedy reply of the one-turn prompt, as ids.
    const std::string user = "Tell me about Trieste.";
    const auto d = ds4({"--dump-tokens", "-p", user, "--nothink"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    test::write_token_ids(dir_->file("prompt.txt"), ids_of(d.out));
    const auto g = ds4({"--token-ids", dir_->file("prompt.txt"), "-n", "8", "--ctx", "256"});
    ASSERT_EQ(g.exit_code, 0) << g.err;
    const std::vector<int32_t> greedy = ids_of(g.out);
    ASSERT_EQ(greedy.size(), 8u) << g.out;

    auto f = gguf::File::open(model_);
    const auto tok = tokenizer::Tokenizer::from_gguf(*f);
    const auto format = chat::ChatFormat::from_gguf(*f, *tok);
    const std::vector<int32_t> obs = tok->encode("<|observation|>", tokenizer::Special::Match);
    ASSERT_EQ(obs.size(), 1u);
    const auto& stops = format->stop_ids();
    ASSERT_NE(std::find(stops.begin(), stops.end(), obs[0]), stops.end());
    ASSERT_NE(obs[0], tok->special().eos) << "the test wants a stop id that is not EOS";
    // The first reply token k >= 2 that is new: making <|observation|> win there ends the reply
    // after k tokens and changes nothing before.
    size_t k = 2;
    while (k < greedy.size() && std::find(greedy.begin(), greedy.begin() + long(k), greedy[k]) != greedy.begin() + long(k)) ++k;
    ASSERT_LT(k, greedy.size());
    for (size_t i = 0; i < k; ++i) ASSERT_EQ(std::find(stops.begin(), stops.end(), greedy[i]), stops.end());
    const std::string patched = dir_->file("glm-stop.gguf");
    swap_output_rows(model_, patched, greedy[k], obs[0]);

    const auto shorter = ds4({"-p", user, "--nothink", "--temp", "0", "-n", std::to_string(k), "--ctx", "256"});
    ASSERT_EQ(shorter.exit_code, 0) << shorter.err;
    const auto stopped = ds4({"-p", user, "--nothink", "--temp", "0", "-n", "40", "--ctx", "256"}, patched);
    ASSERT_EQ(stopped.exit_code, 0) << stopped.err;
    EXPECT_EQ(stopped.out, shorter.out);
    const auto unpatched = ds4({"-p", user, "--nothink", "--temp", "0", "-n", "40", "--ctx", "256"});
    ASSERT_EQ(unpatched.exit_code, 0) << unpatched.err;
    EXPECT_GT(unpatched.out.size(), stopped.out.size()) << "the unpatched model went on";
}

TEST_F(GlmFrontends, UnsetSamplingFlagsTakeTheFormatsDefaults) {
    auto gen = [&](std::vector<std::string> extra) {
        std::vector<std::string> a = {"-p", "Ciao", "--nothink", "--seed", "11", "-n", "24", "--ctx", "256"};
        a.insert(a.end(), extra.begin(), extra.end());
        const auto r = ds4(a);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return r.out;
    };
    const std::string defaults = gen({});
    ASSERT_FALSE(defaults.empty());
    EXPECT_EQ(defaults, gen({"--temp", "1", "--top-p", "0.95", "--min-p", "0"}));  // GLM's
    EXPECT_EQ(defaults, gen({"--top-p", "0.95"}));
    EXPECT_NE(defaults, gen({"--top-p", "1", "--min-p", "0.05"}));  // DeepSeek V4's
    EXPECT_NE(defaults, gen({"--top-p", "0.5"}));                    // a set flag wins
}

TEST_F(GlmFrontends, InspectShowsTheGlmFamily) {
    const auto r = run("ds4", {"--inspect", model_});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string all = r.out + r.err;
    EXPECT_NE(all.find("glm-dsa"), std::string::npos) << all;
    EXPECT_NE(all.find("blk.1.ffn_gate_exps.weight"), std::string::npos) << all;
    EXPECT_NE(all.find("blk.0.ffn_gate.weight"), std::string::npos) << all;  // the dense lead
}

TEST_F(GlmFrontends, InteractiveNothinkSaveAndLoad) {
    const std::string saved = dir_->file("glm.kv");
    auto chat = [&](const std::string& script) {
        const auto r = run("ds4", {"-m", model_, "--threads", "2", "--ctx", "1024", "--temp", "0", "-n", "4"}, script);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return r.err;
    };
    auto prefills = [](const std::string& err) {
        std::vector<std::pair<long, long>> v;
        const std::regex re("this turn prefilled ([0-9]+), reused ([0-9]+)");
        for (auto it = std::sregex_iterator(err.begin(), err.end(), re); it != std::sregex_iterator(); ++it)
            v.push_back({std::stol((*it)[1]), std::stol((*it)[2])});
        return v;
    };
    const std::string first = chat("Hi\n/nothink\nSecond message\n/save " + saved + "\n/quit\n");
    EXPECT_NE(first.find("thinking: off"), std::string::npos) << first;
    const auto pf = prefills(first);
    ASSERT_EQ(pf.size(), 2u) << first;
    EXPECT_GT(pf[1].second, 0) << "the second turn did not reuse the first: " << first;
    ASSERT_NE(first.find("saved "), std::string::npos) << first;
    const std::string second = chat("/load " + saved + "\nAnd then?\n/quit\n");
    ASSERT_NE(second.find("loaded "), std::string::npos) << second;
    const auto pl = prefills(second);
    ASSERT_EQ(pl.size(), 1u) << second;
    EXPECT_GT(pl[0].second, 10) << "the loaded conversation was not reused: " << second;
}

void expect_bit_identical(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
}

std::vector<float> logits_of(model::Model& m, const std::vector<int32_t>& ids, int64_t chunk) {
    const int64_t V = m.info().n_vocab;
    model::Session s(m, {.ctx = 128, .prefill_chunk = chunk});
    std::vector<float> all;
    s.eval(ids, &all, true);
    for (int i = 0; i < 3; ++i) {  // greedy decode steps
        const float* last = all.data() + all.size() - size_t(V);
        std::vector<float> l;
        s.eval({int32_t(std::max_element(last, last + V) - last)}, &l);
        all.insert(all.end(), l.begin(), l.end());
    }
    return all;
}

TEST_F(GlmFrontends, SsdStreamingEqualsResidentWithAndWithoutFullLayers) {
    for (const std::string& path : {model_, q4_}) {
        auto resident = model::open(path, {.threads = 2});
        const auto ids = test::random_token_ids(30, resident->info().n_vocab, 5);
        const std::vector<float> expected = logits_of(*resident, ids, 30);

        auto streamed = model::open(path, {.threads = 2, .stream_experts = true});
        const model::ExpertFileLayout layout = streamed->expert_layout();
        EXPECT_FALSE(layout.layers[0].held) << "the dense lead layer has no routed experts";
        const std::vector<uint32_t> routed = streaming::routed_layers(layout);
        ASSERT_EQ(routed.front(), 1u);
        const int64_t E = layout.n_expert, K = layout.n_expert_used;
        for (size_t full = 0; full <= routed.size(); ++full) {
            for (int64_t slots : {K, E + 1}) {
                for (int64_t chunk : {1, 30}) {
                    const std::string what = path + ": " + std::to_string(full) + " full layers, " +
                                             std::to_string(slots) + " slots, chunk " + std::to_string(chunk);
                    const std::vector<uint32_t> held(routed.begin(), routed.begin() + long(full));
                    std::shared_ptr<streaming::ExpertCache> cache;
                    if (full < routed.size())
                        cache = std::make_shared<streaming::ExpertCache>(streaming::without_layers(layout, held),
                                                                         streaming::CacheOptions{.slots = slots, .io_threads = 2});
                    auto source = std::make_shared<streaming::FullLayers>(layout, held, cache);
                    streamed->set_expert_source(source);
                    expect_bit_identical(expected, logits_of(*streamed, ids, chunk), what);
                    EXPECT_EQ(source->bytes(), uint64_t(full) * uint64_t(E) * layout.layers[1].expert_bytes()) << what;
                    if (cache) {
                        // The cache reads only the streamed layers' experts.
                        const auto& st = cache->stats();
                        EXPECT_GT(st.misses, 0u) << what;
                        EXPECT_EQ(st.bytes_read, (st.misses + st.read_ahead) * cache->expert_bytes()) << what;
                        EXPECT_LE(int64_t(st.misses + st.read_ahead),
                                  int64_t(routed.size() - full) * E * (slots >= E * int64_t(routed.size() - full) ? 1 : 1000))
                            << what;
                    }
                }
            }
        }
    }
}

TEST_F(GlmFrontends, SsdStreamingCliFullLayers) {
    test::write_token_ids(dir_->file("ids.txt"), test::random_token_ids(20, 512, 6));
    auto dump = [&](const std::string& out, std::vector<std::string> extra) {
        std::vector<std::string> a = {"--token-ids", dir_->file("ids.txt"), "--dump-logits-f32", dir_->file(out),
                                      "-n", "3", "--ctx", "64", "--prefill-chunk", "8"};
        a.insert(a.end(), extra.begin(), extra.end());
        return ds4(a, q4_);
    };
    const auto res = dump("resident.f32", {});
    ASSERT_EQ(res.exit_code, 0) << res.err;
    const std::string expected = read_file(dir_->file("resident.f32"));
    ASSERT_FALSE(expected.empty());

    const auto plain = dump("plain.f32", {"--ssd-streaming", "--ssd-streaming-cache-experts", "2"});
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    EXPECT_EQ(read_file(dir_->file("plain.f32")), expected);
    EXPECT_EQ(plain.err.find("full layers"), std::string::npos) << plain.err;
    // 3 routed layers (1-3) of 4 experts of 108 KiB in slots of 132 KiB: two full layers take 7
    // slots of a budget of 9, which leaves the third layer 2 (n_expert_used).
    const auto two = dump("two.f32", {"--ssd-streaming", "--ssd-streaming-cache-experts", "9",
                                      "--ssd-streaming-full-layers", "2"});
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_EQ(read_file(dir_->file("two.f32")), expected);
    EXPECT_NE(two.err.find("(2 experts of"), std::string::npos) << two.err;
    EXPECT_NE(two.err.find("full layers: the first 2 routed layers (1-2) resident, 864.0 KiB"), std::string::npos)
        << two.err;
    EXPECT_NE(two.err.find("at most 2 of 2 slots used"), std::string::npos) << two.err;
    // auto with room for the whole model: every routed layer in memory, no cache.
    const auto all = dump("all.f32", {"--ssd-streaming", "--ssd-streaming-full-layers", "auto"});
    ASSERT_EQ(all.exit_code, 0) << all.err;
    EXPECT_EQ(read_file(dir_->file("all.f32")), expected);
    EXPECT_NE(all.err.find("no expert cache (every routed layer is full); full layers: the first 3 routed layers (1-3)"),
              std::string::npos) << all.err;
    EXPECT_EQ(all.err.find("hit rate"), std::string::npos) << all.err;
    // auto with 11 slots: a full layer (4 slots) would leave fewer than two layers' experts.
    const auto none = dump("none.f32", {"--ssd-streaming", "--ssd-streaming-cache-experts", "11",
                                        "--ssd-streaming-full-layers", "auto"});
    ASSERT_EQ(none.exit_code, 0) << none.err;
    EXPECT_EQ(read_file(dir_->file("none.f32")), expected);
    EXPECT_EQ(none.err.find("full layers"), std::string::npos) << none.err;
    EXPECT_NE(none.err.find("(11 experts of"), std::string::npos) << none.err;

    // Errors: no room left for the cache, bad values, the flag without --ssd-streaming.
    const auto tight = dump("x.f32", {"--ssd-streaming", "--ssd-streaming-cache-experts", "8",
                                      "--ssd-streaming-full-layers", "2"});
    EXPECT_EQ(tight.exit_code, 1) << tight.err;
    EXPECT_NE(tight.err.find("--ssd-streaming-full-layers 2: 2 full layers take 864.0 KiB"), std::string::npos)
        << tight.err;
    for (const char* bad : {"-1", "x", "2.5"}) {
        const auto r = dump("x.f32", {"--ssd-streaming", "--ssd-streaming-full-layers", bad});
        EXPECT_NE(r.exit_code, 0) << bad << r.err;
        EXPECT_NE(r.err.find("expected a layer count >= 0 or auto"), std::string::npos) << r.err;
    }
    const auto alone = dump("x.f32", {"--ssd-streaming-full-layers", "1"});
    EXPECT_NE(alone.exit_code, 0);
    EXPECT_NE(alone.err.find("need --ssd-streaming"), std::string::npos) << alone.err;
}

TEST_F(GlmFrontends, BenchRowsAndProbesOnGlm) {
    const auto ids = test::random_token_ids(64, 512, 8);
    test::write_token_ids(dir_->file("bench-ids.txt"), ids);
    const std::string csv = dir_->file("bench.csv"), probes = dir_->file("probes.txt");
    const auto r = run("ds4-bench", {"-m", model_, "--threads", "2", "--token-ids", dir_->file("bench-ids.txt"),
                                     "--ctx-start", "16", "--ctx-max", "48", "--step-incr", "16", "--gen-tokens", "4",
                                     "--prefill-chunk", "8", "--csv", csv, "--dump-probe-ids", probes});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    std::istringstream rows(read_file(csv));
    std::string line;
    std::getline(rows, line);
    EXPECT_EQ(line, "ctx_tokens,prefill_tokens,prefill_tps,gen_tokens,gen_tps,kvcache_bytes,sessions");
    std::vector<std::string> csv_rows;
    while (std::getline(rows, line)) csv_rows.push_back(line);
    ASSERT_EQ(csv_rows.size(), 3u) << read_file(csv);
    const char* frontier_prefix[] = {"16,16,", "32,16,", "48,16,"};
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(csv_rows[i].rfind(frontier_prefix[i], 0), 0u) << csv_rows[i];
    // Each probe is the greedy continuation of its frontier's prefix (ds4 --token-ids -n 4).
    std::istringstream probe_lines(read_file(probes));
    const int frontiers[] = {16, 32, 48};
    for (int f : frontiers) {
        ASSERT_TRUE(std::getline(probe_lines, line)) << read_file(probes);
        test::write_token_ids(dir_->file("prefix.txt"), std::vector<int32_t>(ids.begin(), ids.begin() + f));
        const auto g = ds4({"--token-ids", dir_->file("prefix.txt"), "-n", "4", "--ctx", "64", "--prefill-chunk", "8"});
        ASSERT_EQ(g.exit_code, 0) << g.err;
        EXPECT_EQ(ids_of(g.out), ids_of(line)) << "frontier " << f;
        EXPECT_EQ(ids_of(line).size(), 4u) << line;
    }
    // Streamed with one full layer: the same probes; ds4-server takes the flag and checks it
    // against the model after the load.
    const std::string streamed = dir_->file("streamed-probes.txt");
    const auto st = run("ds4-bench", {"-m", q4_, "--threads", "2", "--token-ids", dir_->file("bench-ids.txt"),
                                      "--ctx-start", "16", "--ctx-max", "48", "--step-incr", "16", "--gen-tokens", "4",
                                      "--dump-probe-ids", streamed, "--ssd-streaming", "--ssd-streaming-full-layers", "1",
                                      "--ssd-streaming-cache-experts", "6"});
    ASSERT_EQ(st.exit_code, 0) << st.err;
    const auto res = run("ds4-bench", {"-m", q4_, "--threads", "2", "--token-ids", dir_->file("bench-ids.txt"),
                                       "--ctx-start", "16", "--ctx-max", "48", "--step-incr", "16", "--gen-tokens", "4",
                                       "--dump-probe-ids", dir_->file("resident-probes.txt")});
    ASSERT_EQ(res.exit_code, 0) << res.err;
    EXPECT_EQ(read_file(streamed), read_file(dir_->file("resident-probes.txt")));
    EXPECT_NE(st.err.find("full layers: the first 1 routed layers (1-1)"), std::string::npos) << st.err;
    const auto srv = run("ds4-server", {"-m", model_, "--port", "0", "--ssd-streaming", "--ssd-streaming-cache-experts",
                                        "8", "--ssd-streaming-full-layers", "2"});
    EXPECT_EQ(srv.exit_code, 1) << srv.err;
    EXPECT_NE(srv.err.find("ds4-server: --ssd-streaming-full-layers 2: 2 full layers take"), std::string::npos)
        << srv.err;
}

}  // namespace
}  // namespace ds4::glm
