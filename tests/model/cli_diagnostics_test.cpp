// ds4's diagnostics (tools/ds4/diagnostics.h, frontend/instance.h): --dump-logits writes
// upstream's JSON with exactly the logits --token-ids gives for the same prompt,
// --decode-consistency finds decode and prefill equal, --raw-prompt of the rendered prompt
// generates what -p does, --power leaves the output unchanged, --help TOPIC shows its section,
// DS4_LOCK_FILE refuses a second engine, --prefix-file seeds the conversation,
// --simulate-used-memory holds memory without changing the output, and a reply ends
// its line before the timing line when both share a stream.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/tiny_model.h"
#include "support/tool_run.h"

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

class CliDiagnostics : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        model_ = dir_->file("tiny.gguf");
        const auto r = test::write_tiny_model(model_, test::kTinyQ8Io);
        ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }
    // ds4 with the model, 2 threads, --ctx 256, then args; stdout and stderr apart.
    struct Split {
        int code;
        std::string out, err;
    };
    static Split ds4(const std::vector<std::string>& args, const std::string& env = "") {
        std::string cmd = env + " exec " + quote(test::binary("ds4")) + " -m " + quote(model_) +
                          " --threads 2 --ctx 256";
        for (const auto& a : args) cmd.append(" ").append(quote(a));
        cmd.append(" >").append(quote(dir_->file("out.txt"))).append(" 2>").append(quote(dir_->file("err.txt")));
        const auto r = test::run_command({"/bin/sh", "-c", cmd});
        return {r.exit_code, slurp(dir_->file("out.txt")), slurp(dir_->file("err.txt"))};
    }
    static test::TempDir* dir_;
    static std::string model_;
};
test::TempDir* CliDiagnostics::dir_ = nullptr;
std::string CliDiagnostics::model_;

TEST_F(CliDiagnostics, DumpLogitsIsUpstreamsJsonOfTheLibrarysLogits) {
    const std::string json = dir_->file("next.json");
    const auto r = ds4({"-p", "Hello there", "--nothink", "--dump-logits", json});
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(slurp(json));
    for (const char* key : {"source", "model", "backend", "quant_bits", "prompt_tokens", "ctx", "vocab", "argmax_token",
                            "argmax_logit", "logits"})
        EXPECT_TRUE(j.contains(key)) << key;
    EXPECT_EQ(j["source"], "ds4");
    EXPECT_EQ(j["ctx"], 256);
    const std::vector<float> logits = j["logits"].get<std::vector<float>>();
    ASSERT_EQ(int64_t(logits.size()), j["vocab"].get<int64_t>());

    // The same prompt's ids through --token-ids: the last row is the JSON's, exactly.
    const auto d = ds4({"-p", "Hello there", "--nothink", "--dump-tokens"});
    ASSERT_EQ(d.code, 0) << d.err;
    std::ofstream(dir_->file("ids.txt")) << d.out;
    std::istringstream in(d.out);
    int64_t n = 0;
    for (int v; in >> v;) ++n;
    EXPECT_EQ(j["prompt_tokens"], n);
    const std::string raw = dir_->file("all.f32");
    ASSERT_EQ(ds4({"--token-ids", dir_->file("ids.txt"), "--dump-logits-f32", raw}).code, 0);
    const std::string bytes = slurp(raw);
    ASSERT_EQ(bytes.size(), size_t(n) * logits.size() * 4);
    std::vector<float> last(logits.size());
    std::memcpy(last.data(), bytes.data() + (n - 1) * int64_t(logits.size()) * 4, last.size() * 4);
    EXPECT_EQ(last, logits);
    const int top = j["argmax_token"]["id"];
    EXPECT_EQ(j["argmax_logit"].get<float>(), logits[size_t(top)]);
    EXPECT_EQ(int64_t(std::max_element(last.begin(), last.end()) - last.begin()), top);

    const auto none = ds4({"--dump-logits", json});
    EXPECT_NE(none.code, 0);
    EXPECT_NE(none.err.find("--dump-logits needs -p TEXT or --prompt-file FILE"), std::string::npos) << none.err;
}

TEST_F(CliDiagnostics, DecodeConsistencyRawPromptAndPower) {
    const auto replay = ds4({"-p", "Count to ten.", "--nothink", "--dist-replay-check"});
    ASSERT_EQ(replay.code, 0) << replay.out << replay.err;
    EXPECT_NE(replay.out.find("max |first - replay| = 0;"), std::string::npos) << replay.out;
    const auto c = ds4({"-p", "Count to ten.", "--nothink", "--decode-consistency", "6"});
    ASSERT_EQ(c.code, 0) << c.out << c.err;
    EXPECT_NE(c.out.find("6 decoded; max |decode - prefill| = 0 "), std::string::npos) << c.out;
    EXPECT_NE(c.out.find("argmax differs at 0 of 6 steps"), std::string::npos) << c.out;

    const auto plain = ds4({"-p", "Hi", "--nothink", "--temp", "0", "-n", "6"});
    ASSERT_EQ(plain.code, 0) << plain.err;
    ASSERT_FALSE(plain.out.empty());
    std::ofstream(dir_->file("rendered.txt"))
        << "<｜begin▁of▁sentence｜>You are a helpful assistant<｜User｜>Hi<｜Assistant｜></think>";
    const auto raw = ds4({"--raw-prompt", "--prompt-file", dir_->file("rendered.txt"), "--temp", "0", "-n", "6"});
    ASSERT_EQ(raw.code, 0) << raw.err;
    EXPECT_EQ(raw.out, plain.out);
    const auto slow = ds4({"-p", "Hi", "--nothink", "--temp", "0", "-n", "6", "--power", "40", "--warm-weights"});
    ASSERT_EQ(slow.code, 0) << slow.err;
    EXPECT_EQ(slow.out, plain.out);
    EXPECT_NE(slow.err.find("warmed"), std::string::npos) << slow.err;
    EXPECT_NE(ds4({"-p", "Hi", "--power", "0"}).code, 0);

    // One stream for both: the reply ends its line before the timing line.
    const auto both = test::run_command({"/bin/sh", "-c",
                                         "exec " + quote(test::binary("ds4")) + " -m " + quote(model_) +
                                             " --threads 2 --ctx 256 -p Hi --nothink --temp 0 -n 6 2>&1"});
    ASSERT_EQ(both.exit_code, 0) << both.output;
    const size_t at = both.output.find("prefill: ");
    ASSERT_NE(at, std::string::npos) << both.output;
    ASSERT_GT(at, 0u);
    EXPECT_EQ(both.output[at - 1], '\n') << both.output;
    EXPECT_EQ(both.output.substr(0, plain.out.size()), plain.out);
}

// --prefix-file: the turns come before the prompt as a conversation that happened: the model
// sees what CHAT_FORMAT.md writes for such a history (checked against that text, rendered here by
// hand and given as --raw-prompt), and a malformed file stops the run before the model loads.
TEST_F(CliDiagnostics, PrefixFileSeedsTheConversation) {
    std::ofstream(dir_->file("prefix.txt")) << "USER: What is 2+2?\nASSISTANT: 4\nUSER: And 3+3?\nASSISTANT: 6\n";
    const auto seeded = ds4({"--prefix-file", dir_->file("prefix.txt"), "-p", "Hi", "--nothink", "--temp", "0", "-n", "6"});
    ASSERT_EQ(seeded.code, 0) << seeded.err;
    ASSERT_FALSE(seeded.out.empty());
    std::ofstream(dir_->file("history.txt"))
        << "<｜begin▁of▁sentence｜>You are a helpful assistant<｜User｜>What is 2+2?<｜Assistant｜></think>4"
           "<｜end▁of▁sentence｜><｜User｜>And 3+3?<｜Assistant｜></think>6<｜end▁of▁sentence｜><｜User｜>Hi<｜Assistant｜></think>";
    const auto raw = ds4({"--raw-prompt", "--prompt-file", dir_->file("history.txt"), "--temp", "0", "-n", "6"});
    ASSERT_EQ(raw.code, 0) << raw.err;
    EXPECT_EQ(seeded.out, raw.out);
    const auto tokens = ds4({"--prefix-file", dir_->file("prefix.txt"), "-p", "Hi", "--nothink", "--dump-tokens"});
    const auto plain = ds4({"-p", "Hi", "--nothink", "--dump-tokens"});
    ASSERT_EQ(tokens.code, 0) << tokens.err;
    EXPECT_GT(tokens.out.size(), plain.out.size() + 20);

    std::ofstream(dir_->file("bad-prefix.txt")) << "USER: a question without its answer\n";
    const auto bad = ds4({"--prefix-file", dir_->file("bad-prefix.txt"), "-p", "Hi"});
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("the last turn must be the assistant's"), std::string::npos) << bad.err;
    const auto raw_too = ds4({"--prefix-file", dir_->file("prefix.txt"), "--raw-prompt", "-p", "Hi"});
    EXPECT_EQ(raw_too.code, 2);
}

// --simulate-used-memory takes its memory before the model loads and changes no output; a size
// the machine does not have is refused before anything loads.
TEST_F(CliDiagnostics, SimulateUsedMemoryHoldsMemoryAndChangesNoOutput) {
    const auto plain = ds4({"-p", "Hi", "--nothink", "--temp", "0", "-n", "4"});
    const auto held = ds4({"-p", "Hi", "--nothink", "--temp", "0", "-n", "4", "--simulate-used-memory", "0.25GB"});
    ASSERT_EQ(plain.code, 0) << plain.err;
    if (held.code != 0 && held.err.find("cannot lock") != std::string::npos) GTEST_SKIP() << held.err;
    ASSERT_EQ(held.code, 0) << held.err;
    EXPECT_EQ(held.out, plain.out);
    EXPECT_NE(held.err.find("--simulate-used-memory: holding 0.25 GiB locked"), std::string::npos) << held.err;
    const auto huge = ds4({"-p", "Hi", "--simulate-used-memory", "1000000"});
    EXPECT_NE(huge.code, 0);
    EXPECT_NE(huge.err.find("would leave less than 1 GiB"), std::string::npos) << huge.err;
    EXPECT_NE(ds4({"-p", "Hi", "--simulate-used-memory", "2MB"}).code, 0);
}

TEST_F(CliDiagnostics, HelpTopicsAndTheInstanceLock) {
    const auto diag = ds4({"--help", "diagnostics"});
    EXPECT_EQ(diag.code, 0);
    EXPECT_NE(diag.out.find("--dump-logits"), std::string::npos) << diag.out;
    EXPECT_NE(diag.out.find("--decode-consistency"), std::string::npos) << diag.out;
    EXPECT_EQ(diag.out.find("--temp"), std::string::npos) << diag.out;
    const auto steer = ds4({"--help", "steering"});
    EXPECT_NE(steer.out.find("--dir-steering-attn"), std::string::npos) << steer.out;
    EXPECT_EQ(steer.out.find("--dump-logits"), std::string::npos) << steer.out;
    EXPECT_NE(ds4({"--help", "commands"}).out.find("/steer S"), std::string::npos);
    const auto bad = ds4({"--help", "nonsense"});
    EXPECT_EQ(bad.code, 0);
    EXPECT_NE(bad.err.find("no help topic 'nonsense'"), std::string::npos) << bad.err;
    EXPECT_NE(bad.out.find("--dir-steering-file"), std::string::npos);

    const std::string lock = dir_->file("ds4.lock");
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
    ASSERT_EQ(::write(fd, "4242\n", 5), 5);
    const auto refused = ds4({"-p", "Hi", "-n", "1"}, "DS4_LOCK_FILE=" + quote(lock));
    EXPECT_NE(refused.code, 0);
    EXPECT_NE(refused.err.find("another ds4 process is already running (pid 4242"), std::string::npos)
        << refused.err;
    ::close(fd);  // released: the next one runs and leaves its own pid
    const auto ok = ds4({"-p", "Hi", "-n", "1"}, "DS4_LOCK_FILE=" + quote(lock));
    EXPECT_EQ(ok.code, 0) << ok.err;
    EXPECT_NE(slurp(lock), "4242\n");
}

}  // namespace
}  // namespace ds4
