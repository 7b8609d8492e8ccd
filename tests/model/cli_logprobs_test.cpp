// ds4's logprob diagnostics (tools/ds4/logprobs.h, vectors.h) on the tiny real-vocabulary
// model, each against an independent computation: the log-softmax, in this test, of the
// logits `--token-ids --dump-logits-f32` gives for the same tokens.
//   --perplexity-file: the NLL of every scored token, window by window (--ctx 96, 3 windows);
//   --dump-logprobs: each step's top-k ids, logits and logprobs, and the greedy choice;
//   --logprob-vectors: vectors written here from the engine's own numbers pass, a perturbed
//   logprob, a perturbed official token and a malformed file fail; DeepSeek's official files
//   (tests/data/official-vectors) parse; --help diagnostics lists the flags, and two modes at
//   once are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/data_path.h"
#include "gguf/reader.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"
#include "tokenizer/tokenizer.h"
#include "vectors.h"

namespace ds4 {
namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

std::vector<int32_t> parse_ids(const std::string& text) {
    std::istringstream in(text);
    std::vector<int32_t> ids;
    for (int32_t v; in >> v;) ids.push_back(v);
    return ids;
}

// log p of every token of a row, in double.
std::vector<double> log_softmax(const float* row, int64_t V) {
    double mx = -INFINITY;
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
    std::vector<double> out(static_cast<size_t>(V));
    for (int64_t v = 0; v < V; ++v) out[size_t(v)] = double(row[v]) - mx - std::log(sum);
    return out;
}

std::string hex(const std::string& bytes) {
    std::string h;
    for (unsigned char c : bytes) h += fmt::format("{:02x}", c);
    return h;
}

class CliLogprobs : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        model_ = dir_->file("tiny.gguf");
        const auto r = test::write_tiny_model(model_, test::kTinyQ8Io);
        ASSERT_EQ(r.exit_code, 0) << r.output;
        const auto f = gguf::File::open(model_);
        tok_ = tokenizer::Tokenizer::from_gguf(*f).release();
    }
    static void TearDownTestSuite() {
        delete tok_;
        delete dir_;
        dir_ = nullptr;
    }
    struct Split {
        int code;
        std::string out, err;
    };
    // ds4 with the model and 2 threads, then args; stdout and stderr apart.
    static Split ds4(const std::vector<std::string>& args) {
        std::string cmd = "exec " + quote(test::binary("ds4")) + " -m " + quote(model_) + " --threads 2";
        for (const auto& a : args) cmd.append(" ").append(quote(a));
        cmd.append(" >").append(quote(dir_->file("out.txt"))).append(" 2>").append(quote(dir_->file("err.txt")));
        const auto r = test::run_command({"/bin/sh", "-c", cmd});
        return {r.exit_code, slurp(dir_->file("out.txt")), slurp(dir_->file("err.txt"))};
    }
    // The logits of every position of `ids` (the independent path: --token-ids).
    static std::vector<float> logits_of(const std::vector<int32_t>& ids, const std::string& ctx, int64_t* V) {
        test::write_token_ids(dir_->file("ids.txt"), ids);
        const auto r = ds4({"--token-ids", dir_->file("ids.txt"), "--dump-logits-f32", dir_->file("l.f32"), "--ctx", ctx});
        EXPECT_EQ(r.code, 0) << r.err;
        const std::string b = slurp(dir_->file("l.f32"));
        std::vector<float> out(b.size() / 4);
        std::memcpy(out.data(), b.data(), out.size() * 4);
        *V = ids.empty() ? 0 : int64_t(out.size()) / int64_t(ids.size());
        return out;
    }
    static test::TempDir* dir_;
    static std::string model_;
    static tokenizer::Tokenizer* tok_;
};
test::TempDir* CliLogprobs::dir_ = nullptr;
std::string CliLogprobs::model_;
tokenizer::Tokenizer* CliLogprobs::tok_ = nullptr;

TEST_F(CliLogprobs, PerplexityFileIsTheLogSoftmaxOfTheLogitsWindowByWindow) {
    std::string text;
    for (int i = 0; i < 12; ++i) text += fmt::format("Line {}: the quick brown fox jumps over the lazy dog. ", i);
    const std::string file = dir_->file("text.txt");
    std::ofstream(file) << text;
    const auto d = ds4({"--dump-tokens", "--raw", "--prompt-file", file});
    ASSERT_EQ(d.code, 0) << d.err;
    const std::vector<int32_t> ids = parse_ids(d.out);
    const int64_t N = int64_t(ids.size()), ctx = 96, P = 32;
    ASSERT_GT(N, P + 2 * (ctx - P)) << "three windows wanted";
    ASSERT_LE(N, ctx + 2 * (ctx - P));

    // Windows start every ctx - 32 tokens; each scores its tokens from the 33rd on.
    double nll = 0;
    int64_t windows = 0;
    std::vector<double> per_token;  // -log p of tokens P, P+1, ...
    for (int64_t begin = 0; begin + P < N; begin += ctx - P, ++windows) {
        const int64_t to = std::min(begin + ctx, N);
        int64_t V = 0;
        const std::vector<float> l = logits_of({ids.begin() + begin, ids.begin() + to - 1}, "96", &V);
        ASSERT_GT(V, 0);
        for (int64_t p = begin + P - 1; p < to - 1; ++p) {
            const double lp = log_softmax(l.data() + (p - begin) * V, V)[size_t(ids[size_t(p + 1)])];
            per_token.push_back(-lp);
            nll -= lp;
        }
    }
    ASSERT_EQ(int64_t(per_token.size()), N - P);
    EXPECT_EQ(windows, 3);

    const auto r = ds4({"--perplexity-file", file, "--ctx", "96"});
    ASSERT_EQ(r.code, 0) << r.err;
    long long tokens = 0, scored = 0;
    double got_nll = 0, avg = 0, ppl = 0;
    ASSERT_EQ(std::sscanf(r.out.c_str(), "tokens=%lld scored=%lld nll=%lf avg_nll=%lf ppl=%lf", &tokens, &scored, &got_nll,
                          &avg, &ppl), 5) << r.out;
    EXPECT_EQ(tokens, N);
    EXPECT_EQ(scored, N - P);
    EXPECT_NEAR(got_nll, nll, 1e-6 * nll);
    EXPECT_NEAR(avg, nll / double(N - P), 1e-6 * avg);
    EXPECT_NEAR(ppl, std::exp(nll / double(N - P)), 1e-5 * ppl);
    EXPECT_NE(r.err.find("3 window(s) of --ctx 96"), std::string::npos) << r.err;

    // -n caps the scored tokens: the first 10 of the first window.
    const auto capped = ds4({"--perplexity-file", file, "--ctx", "96", "-n", "10"});
    ASSERT_EQ(capped.code, 0) << capped.err;
    ASSERT_EQ(std::sscanf(capped.out.c_str(), "tokens=%lld scored=%lld nll=%lf", &tokens, &scored, &got_nll), 3);
    double first10 = 0;
    for (int i = 0; i < 10; ++i) first10 += per_token[size_t(i)];
    EXPECT_EQ(scored, 10);
    EXPECT_NEAR(got_nll, first10, 1e-6 * first10);

    std::ofstream(dir_->file("short.txt")) << "Too short.";
    const auto s = ds4({"--perplexity-file", dir_->file("short.txt")});
    EXPECT_EQ(s.code, 1);
    EXPECT_NE(s.err.find("needs more than 32 tokens"), std::string::npos) << s.err;
}

TEST_F(CliLogprobs, DumpLogprobsIsTheGreedyPathWithTheTopKOfTheLogits) {
    const std::string json = dir_->file("lp.json");
    const auto r = ds4({"-p", "Hello there", "--nothink", "-n", "4", "--ctx", "256", "--dump-logprobs", json,
                        "--logprobs-top-k", "5"});
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(slurp(json));
    EXPECT_EQ(j["source"], "ds4");
    EXPECT_EQ(j["ctx"], 256);
    EXPECT_EQ(j["top_k"], 5);
    const auto d = ds4({"-p", "Hello there", "--nothink", "--dump-tokens"});
    ASSERT_EQ(d.code, 0) << d.err;
    std::vector<int32_t> ids = parse_ids(d.out);
    const int64_t P = int64_t(ids.size());
    EXPECT_EQ(j["prompt_tokens"], P);
    const auto& steps = j["steps"];
    ASSERT_GE(steps.size(), 1u);
    ASSERT_LE(steps.size(), 4u);
    for (size_t i = 0; i + 1 < steps.size(); ++i) ids.push_back(steps[i]["selected"]["id"].get<int32_t>());
    int64_t V = 0;
    const std::vector<float> l = logits_of(ids, "256", &V);
    for (size_t i = 0; i < steps.size(); ++i) {
        const auto& st = steps[i];
        EXPECT_EQ(st["step"], i);
        const float* row = l.data() + (P - 1 + int64_t(i)) * V;
        std::vector<int32_t> order(static_cast<size_t>(V));
        for (int32_t v = 0; v < V; ++v) order[size_t(v)] = v;
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
        const std::vector<double> lp = log_softmax(row, V);
        ASSERT_EQ(st["top_logprobs"].size(), 5u);
        EXPECT_EQ(st["selected"]["id"], order[0]) << "step " << i;
        const std::string& bytes = tok_->token_bytes(order[0]);
        EXPECT_EQ(st["selected"]["bytes"].size(), bytes.size());
        for (size_t k = 0; k < 5; ++k) {
            const auto& t = st["top_logprobs"][k];
            EXPECT_EQ(t["token"]["id"], order[k]) << "step " << i << " rank " << k;
            EXPECT_EQ(t["logit"].get<float>(), row[order[k]]);
            EXPECT_NEAR(t["logprob"].get<double>(), lp[size_t(order[k])], 1e-6);
        }
    }
    const auto none = ds4({"--dump-logprobs", json});
    EXPECT_NE(none.code, 0);
    EXPECT_NE(none.err.find("--dump-logprobs needs -p TEXT or --prompt-file FILE"), std::string::npos) << none.err;
}

TEST_F(CliLogprobs, LogprobVectorsPassOnTheEnginesOwnVectorsAndFailWhenPerturbed) {
    // A case as upstream's check runs it: one user turn, no system message, thinking off.
    std::ofstream(dir_->file("p.txt")) << "Name three primary colours.";
    const auto d = ds4({"--prompt-file", dir_->file("p.txt"), "--nothink", "-sys", "", "--dump-tokens"});
    ASSERT_EQ(d.code, 0) << d.err;
    std::vector<int32_t> ids = parse_ids(d.out);
    const int64_t P = int64_t(ids.size());
    // Three greedy steps (--token-ids -n prints the greedy continuation), then their logits.
    test::write_token_ids(dir_->file("pids.txt"), ids);
    const auto g = ds4({"--token-ids", dir_->file("pids.txt"), "-n", "3", "--ctx", "256"});
    ASSERT_EQ(g.code, 0) << g.err;
    const std::vector<int32_t> greedy = parse_ids(g.out);
    ASSERT_EQ(greedy.size(), 3u) << g.out;
    ids.push_back(greedy[0]), ids.push_back(greedy[1]);
    int64_t V = 0;
    const std::vector<float> l = logits_of(ids, "256", &V);
    std::string vec = "# ds4-official-logprob-vectors-v1\ncase own 256 3 p.txt\n";
    std::vector<std::vector<std::pair<int32_t, double>>> tops;
    for (int s = 0; s < 3; ++s) {
        const float* row = l.data() + (P - 1 + s) * V;
        const std::vector<double> lp = log_softmax(row, V);
        std::vector<int32_t> order(static_cast<size_t>(V));
        for (int32_t v = 0; v < V; ++v) order[size_t(v)] = v;
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
        ASSERT_EQ(order[0], greedy[size_t(s)]);
        vec += fmt::format("step {} {} 4\n", s, hex(tok_->token_bytes(order[0])));
        tops.emplace_back();
        for (int k = 0; k < 4; ++k) {
            vec += fmt::format("top {} {:.6f}\n", hex(tok_->token_bytes(order[size_t(k)])), lp[size_t(order[size_t(k)])]);
            tops.back().push_back({order[size_t(k)], lp[size_t(order[size_t(k)])]});
        }
    }
    vec += "end\n";
    std::ofstream(dir_->file("own.vec")) << vec;
    auto r = ds4({"--logprob-vectors", dir_->file("own.vec")});
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("PASS own: steps 3, selected 3/3, official top in local top-20 12/12"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("logprob-vectors: 1 cases, 1 passed, 0 failed"), std::string::npos) << r.out;

    // One official logprob 5 nats off: beyond upstream's 4, within a bound of 6.
    std::string off = vec;
    const std::string line = fmt::format("top {} {:.6f}\n", hex(tok_->token_bytes(tops[1][2].first)), tops[1][2].second);
    ASSERT_NE(off.find(line), std::string::npos);
    off.replace(off.find(line), line.size(), fmt::format("top {} {:.6f}\n", hex(tok_->token_bytes(tops[1][2].first)), tops[1][2].second - 5));
    std::ofstream(dir_->file("off.vec")) << off;
    r = ds4({"--logprob-vectors", dir_->file("off.vec")});
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("FAIL own"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("first failure: step 1: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("logprob-vectors: 1 cases, 0 passed, 1 failed"), std::string::npos) << r.out;
    r = ds4({"--logprob-vectors", dir_->file("off.vec"), "--logprob-vectors-max-delta", "6"});
    EXPECT_EQ(r.code, 0) << r.out << r.err;

    // The official token of step 2 is the local second choice: the argmax disagrees.
    std::string other = vec;
    const std::string step2 = fmt::format("step 2 {} 4\n", hex(tok_->token_bytes(tops[2][0].first)));
    other.replace(other.find(step2), step2.size(), fmt::format("step 2 {} 4\n", hex(tok_->token_bytes(tops[2][1].first))));
    std::ofstream(dir_->file("other.vec")) << other;
    r = ds4({"--logprob-vectors", dir_->file("other.vec")});
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("selected 2/3"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("first failure: step 2: argmax"), std::string::npos) << r.out;

    // A malformed file: the error names the line.
    std::ofstream(dir_->file("bad.vec")) << "case own 256 3 p.txt\nstep 0 zz 1\n";
    r = ds4({"--logprob-vectors", dir_->file("bad.vec")});
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("bad.vec:2: expected \"step <index> <selected-hex> <top-count>\""), std::string::npos) << r.err;
}

TEST(OfficialVectors, DeepSeeksFilesParseAndNameTokensOfTheVocabulary) {
    const std::string dir = std::string(DS4_SOURCE_DIR) + "/tests/data/official-vectors";
    const std::vector<cli::VectorCase> cases = cli::read_vectors(dir + "/official.vec");
    ASSERT_EQ(cases.size(), 5u);
    const std::vector<std::pair<std::string, size_t>> want = {{"short_italian_fact", 4}, {"short_code_completion", 4},
                                                              {"short_reasoning_plain", 1}, {"long_memory_archive", 4},
                                                              {"long_code_audit", 4}};
    for (size_t i = 0; i < 5; ++i) {
        EXPECT_EQ(cases[i].id, want[i].first);
        EXPECT_EQ(cases[i].steps.size(), want[i].second);
        // Upstream's path (tests/test-vectors/prompts/...) found next to the .vec.
        EXPECT_EQ(cases[i].prompt_file, dir + "/prompts/" + want[i].first + ".txt");
        EXPECT_TRUE(std::filesystem::exists(cases[i].prompt_file));
        for (const auto& st : cases[i].steps) ASSERT_FALSE(st.top.empty());
    }
    EXPECT_EQ(cases[0].ctx, 16384);
    EXPECT_EQ(cases[0].steps[0].selected, "Ada");
    EXPECT_EQ(cases[0].steps[1].selected, " Lov");
    EXPECT_EQ(cases[4].steps[3].selected, " code");
    EXPECT_EQ(cases[0].steps[0].top[0].logprob, 0.0);
}

TEST_F(CliLogprobs, HelpListsTheFlagsAndOneModeAtATime) {
    const auto h = ds4({"--help", "diagnostics"});
    ASSERT_EQ(h.code, 0) << h.err;
    for (const char* flag : {"--logprob-vectors", "--logprob-vectors-max-delta", "--perplexity-file", "--dump-logprobs",
                             "--logprobs-top-k"})
        EXPECT_NE(h.out.find(flag), std::string::npos) << flag << "\n" << h.out;
    const auto two = ds4({"--perplexity-file", dir_->file("p.txt"), "--dump-logprobs", dir_->file("x.json"), "-p", "Hi"});
    EXPECT_EQ(two.code, 1);
    EXPECT_NE(two.err.find("separate runs: give one"), std::string::npos) << two.err;
    EXPECT_NE(ds4({"--dump-logprobs", dir_->file("x.json"), "-p", "Hi", "--logprobs-top-k", "129"}).code, 0);
}

// Every official token (selected and top) is one token of the real vocabulary, so the check
// can match them all by bytes.
TEST_F(CliLogprobs, OfficialTokensAreTokensOfTheVocabulary) {
    std::set<std::string> vocab;
    for (int32_t id = 0; id < tok_->n_vocab(); ++id) vocab.insert(tok_->token_bytes(id));
    const auto cases = cli::read_vectors(std::string(DS4_SOURCE_DIR) + "/tests/data/official-vectors/official.vec");
    int tokens = 0;
    for (const auto& c : cases)
        for (const auto& st : c.steps) {
            EXPECT_TRUE(vocab.count(st.selected)) << c.id << ": " << st.selected;
            for (const auto& t : st.top) EXPECT_TRUE(vocab.count(t.bytes)) << c.id << ": " << t.bytes;
            tokens += 1 + int(st.top.size());
        }
    EXPECT_EQ(tokens, 34);
}

// Upstream's quality-testing manifests (tests/data/quality-testing): every row's prompt and
// continuation, named from upstream's repository root, resolves to a file of the set.
TEST(OfficialVectors, UpstreamManifestsResolve) {
    for (const char* set : {"flash", "pro"}) {
        const std::string manifest = std::string(DS4_SOURCE_DIR) + "/tests/data/quality-testing/" + set + "/manifest.tsv";
        std::ifstream in(manifest);
        std::string line;
        ASSERT_TRUE(std::getline(in, line)) << manifest;
        EXPECT_EQ(line, "# id\tprompt_file\tcontinuation_file\tresponse_file");
        int rows = 0;
        while (std::getline(in, line)) {
            std::istringstream f(line);
            std::string id, prompt, cont;
            std::getline(f, id, '\t'), std::getline(f, prompt, '\t'), std::getline(f, cont, '\t');
            const std::string p = resolve_data_path(manifest, prompt), c = resolve_data_path(manifest, cont);
            EXPECT_TRUE(std::filesystem::exists(p)) << p;
            EXPECT_TRUE(std::filesystem::exists(c)) << c;
            EXPECT_NE(p.find(std::string(set) + "/prompts/" + id + ".txt"), std::string::npos) << p;
            ++rows;
        }
        EXPECT_EQ(rows, 100) << set;
    }
}

}  // namespace
}  // namespace ds4
