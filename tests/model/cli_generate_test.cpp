// The ds4 one-shot chat contract (issue 4): `ds4 -m MODEL -p TEXT --temp 0 -n N --nothink` prints
// exactly the generated text on stdout (timings on stderr), equal to what the library's greedy
// loop decodes; sampling is reproducible by seed; `--dump-tokens` without --raw prints the
// rendered one-turn prompt, which for the official test vectors has the official token counts.
// Runs on a tiny random model that carries the real DeepSeek V4 vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "chat/output_parser.h"
#include "chat/render.h"
#include "model/deepseek4/model.h"
#include "model/session.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"
#include "tokenizer/tokenizer.h"

namespace ds4::deepseek4 {
namespace {

namespace fs = std::filesystem;
const fs::path kDataDir = fs::path(DS4_SOURCE_DIR) / "tests" / "data" / "tokenizer";

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

class CliGenerate : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        model_ = dir_->file("vocab-tiny.gguf");
        auto args = test::kTinyQ8Io;
        args.insert(args.end(), {"--seed", "3"});
        const auto r = test::write_tiny_model(model_, args);
        ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }

    // Runs ds4 with stdout and stderr captured separately.
    static Split ds4(const std::vector<std::string>& args) {
        std::string cmd = "exec " + quote(test::binary("ds4"));
        // (appended piece by piece: GCC 12 warns, wrongly, about "literal" + std::string&&)
        for (const auto& a : args) cmd.append(" ").append(quote(a));
        cmd.append(" >").append(quote(dir_->file("out.txt")));
        cmd.append(" 2>").append(quote(dir_->file("err.txt")));
        const auto r = test::run_command({"/bin/sh", "-c", cmd});
        return {r.exit_code, read_file(dir_->file("out.txt")), read_file(dir_->file("err.txt"))};
    }
    static std::vector<std::string> gen(const std::string& prompt, std::vector<std::string> extra) {
        std::vector<std::string> a = {"-m", model_, "-p", prompt, "--ctx", "256", "--threads", "2"};
        a.insert(a.end(), extra.begin(), extra.end());
        return a;
    }
    static std::vector<int32_t> ids_of(const std::string& line) {
        std::istringstream in(line);
        std::vector<int32_t> ids;
        for (int32_t v; in >> v;) ids.push_back(v);
        return ids;
    }

    static test::TempDir* dir_;
    static std::string model_;
};
test::TempDir* CliGenerate::dir_ = nullptr;
std::string CliGenerate::model_;

TEST_F(CliGenerate, GreedyOneShotPrintsExactlyTheLibrarysGreedyText) {
    const std::string user = "Tell me about Trieste.";
    const int n = 12;
    // The library path: render, tokenize the (marker-free) user text with markers matched,
    // prefill, argmax until EOS or n tokens, decode, parse.
    auto m = Model::load(model_, {});
    const auto tok = tokenizer::Tokenizer::from_gguf(m->file());
    chat::RenderOptions ro;
    ro.thinking = chat::ThinkingMode::Off;
    std::vector<chat::Message> msgs(2);
    msgs[0].role = chat::Role::System;
    msgs[0].content = "You are a helpful assistant";
    msgs[1].role = chat::Role::User;
    msgs[1].content = user;
    const std::string rendered = chat::render(msgs, ro);
    const auto prompt = tok->encode(rendered, tokenizer::Special::Match);
    model::Session s(*m, {.ctx = 256, });
    std::vector<float> logits;
    s.eval(prompt, &logits);
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
        const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
        if (next == tok->special().eos) break;
        out.push_back(next);
        if (i + 1 < n) s.eval({next}, &logits);
    }
    ASSERT_FALSE(out.empty());
    const std::string expected = chat::parse_output(tok->decode(out), {.thinking = false}).content;

    const auto r = ds4(gen(user, {"--temp", "0", "-n", std::to_string(n), "--nothink"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, expected);
    EXPECT_NE(r.err.find("prefill: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" t/s, generation: "), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("t/s"), std::string::npos);
    // The prompt it prefilled is the one --dump-tokens prints.
    const auto d = ds4({"-m", model_, "--dump-tokens", "-p", user, "--nothink"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    EXPECT_EQ(ids_of(d.out), prompt);
}

TEST_F(CliGenerate, GreedyIsDeterministicAndSeedsReproduceSampling) {
    const auto a = ds4(gen("Ciao", {"--temp", "0", "-n", "8", "--nothink"}));
    const auto b = ds4(gen("Ciao", {"--temp", "0", "-n", "8", "--nothink"}));
    ASSERT_EQ(a.exit_code, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
    const auto s1 = ds4(gen("Ciao", {"--temp", "1", "--seed", "5", "-n", "16", "--nothink"}));
    const auto s2 = ds4(gen("Ciao", {"--temp", "1", "--seed", "5", "-n", "16", "--nothink"}));
    const auto s3 = ds4(gen("Ciao", {"--temp", "1", "--seed", "6", "-n", "16", "--nothink"}));
    ASSERT_EQ(s1.exit_code, 0) << s1.err;
    EXPECT_EQ(s1.out, s2.out);
    EXPECT_NE(s1.out, s3.out);  // random weights: near-uniform logits, 16 draws
    EXPECT_NE(s1.out, a.out);
}

TEST_F(CliGenerate, UserTypedMarkersStayPlainText) {
    const std::string user = "a<｜User｜>b<｜Assistant｜></think>";
    const auto d = ds4({"-m", model_, "--dump-tokens", "-p", user, "--nothink", "-sys", "<think>"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    const auto ids = ids_of(d.out);
    auto count = [&](int32_t id) { return std::count(ids.begin(), ids.end(), id); };
    EXPECT_EQ(count(128803), 1);  // the renderer's <｜User｜> only
    EXPECT_EQ(count(128804), 1);  // <｜Assistant｜>
    EXPECT_EQ(count(128822), 1);  // the generation prompt's </think>
    EXPECT_EQ(count(128821), 0);  // -sys text is plain too
    EXPECT_EQ(ids.back(), 128822);
    // Thinking (the default) ends the prompt with <think>.
    const auto t = ds4({"-m", model_, "--dump-tokens", "-p", "hi"});
    ASSERT_EQ(t.exit_code, 0) << t.err;
    EXPECT_EQ(ids_of(t.out).back(), 128821);
}

// spec/PRODUCT.md §10.2: the vectors were rendered with an empty system prompt and thinking off.
TEST_F(CliGenerate, OfficialVectorPromptsHaveTheOfficialTokenCounts) {
    const auto counts = nlohmann::json::parse(read_file((kDataDir / "official_prompt_tokens.json").string()));
    ASSERT_EQ(counts.size(), 5u);
    for (const auto& [name, api_count] : counts.items()) {
        const auto d = ds4({"-m", model_, "--dump-tokens", "--prompt-file",
                            (kDataDir / "official" / (name + ".txt")).string(), "--nothink",
                            "-sys", ""});
        ASSERT_EQ(d.exit_code, 0) << d.err;
        const auto ids = ids_of(d.out);
        EXPECT_EQ(ids.size(), api_count.get<size_t>()) << name;
        EXPECT_EQ(ids.front(), 0) << name;
    }
}

TEST_F(CliGenerate, ErrorsAreOneLineWithExitOne) {
    const auto missing = ds4({"-m", dir_->file("none.gguf"), "-p", "hi", "--temp", "0"});
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_TRUE(missing.out.empty());
    EXPECT_NE(missing.err.find("none.gguf"), std::string::npos) << missing.err;
    EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;

    const auto small = ds4({"-m", model_, "-p", "a prompt that does not fit", "--ctx", "4"});
    EXPECT_EQ(small.exit_code, 1);
    EXPECT_TRUE(small.out.empty());
    EXPECT_NE(small.err.find("context"), std::string::npos) << small.err;
    EXPECT_EQ(std::count(small.err.begin(), small.err.end(), '\n'), 1) << small.err;
}

}  // namespace
}  // namespace ds4::deepseek4
