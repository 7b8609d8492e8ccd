// ds4 with speculative decoding (docs/SPECULATIVE.md): --mtp FILE (an MTP support GGUF) and
// --dspark --mtp FILE (a DSpark support GGUF) print exactly the text of plain greedy decoding,
// say what they loaded and how many drafts were accepted; bad combinations are usage errors.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4::test {
namespace {

class CliSpeculative : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new TempDir;
        model_ = dir_->file("model.gguf");
        mtp_ = dir_->file("mtp.gguf");
        dspark_ = dir_->file("dspark.gguf");
        auto args = kTinyQ8Io;
        args.insert(args.end(), {"--mtp-out", mtp_, "--dspark-out", dspark_});
        const auto r = write_tiny_model(model_, args);
        ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    static void TearDownTestSuite() { delete dir_; }

    // ds4 one-shot, greedy, no thinking; stdout only (stderr to err.txt).
    static RunResult ds4(std::vector<std::string> extra, std::string* err = nullptr) {
        std::vector<std::string> a = {binary("ds4"), "-m", model_, "-p", "Tell me about the sea.", "--ctx", "512",
                                      "--temp", "0", "-n", "32", "--nothink", "--threads", "2"};
        a.insert(a.end(), extra.begin(), extra.end());
        const std::string e = dir_->file("err.txt");
        std::string cmd;
        for (const auto& s : a) cmd.append("'").append(s).append("' ");
        const RunResult r = run_command({"/bin/sh", "-c", "exec " + cmd + "2>" + e});
        if (err) *err = run_command({"/bin/cat", e}).output;
        return r;
    }

    static TempDir* dir_;
    static std::string model_, mtp_, dspark_;
};
TempDir* CliSpeculative::dir_ = nullptr;
std::string CliSpeculative::model_, CliSpeculative::mtp_, CliSpeculative::dspark_;

TEST_F(CliSpeculative, DraftedRunsPrintThePlainGreedyText) {
    const RunResult plain = ds4({});
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    ASSERT_FALSE(plain.output.empty());
    std::string err;
    const RunResult mtp = ds4({"--mtp", mtp_, "--mtp-draft", "4", "--mtp-margin", "0"}, &err);
    ASSERT_EQ(mtp.exit_code, 0) << err;
    EXPECT_EQ(mtp.output, plain.output);
    EXPECT_NE(err.find("speculative decoding: MTP head"), std::string::npos) << err;
    EXPECT_NE(err.find("drafts: "), std::string::npos) << err;  // some were verified
    const RunResult chunk1 = ds4({"--mtp", mtp_, "--mtp-draft", "3", "--mtp-margin", "0", "--prefill-chunk", "1"});
    EXPECT_EQ(chunk1.output, plain.output);
    // With the routed experts read from disk (the drafted rows' experts fetched in the same
    // batched evaluation; the support file's experts stay resident).
    const RunResult streamed = ds4({"--ssd-streaming", "--mtp", mtp_, "--mtp-draft", "3", "--mtp-margin", "0"}, &err);
    ASSERT_EQ(streamed.exit_code, 0) << err;
    EXPECT_EQ(streamed.output, plain.output);
    EXPECT_NE(err.find("drafts: "), std::string::npos) << err;
    const RunResult dspark = ds4({"--mtp", dspark_, "--dspark", "--dspark-confidence", "0"}, &err);
    ASSERT_EQ(dspark.exit_code, 0) << err;
    EXPECT_EQ(dspark.output, plain.output);
    EXPECT_NE(err.find("speculative decoding: DSpark"), std::string::npos) << err;
    const RunResult strict = ds4({"--mtp", dspark_, "--dspark", "--dspark-strict"}, &err);
    ASSERT_EQ(strict.exit_code, 0) << err;
    EXPECT_EQ(strict.output, plain.output);
    EXPECT_NE(err.find("target-only"), std::string::npos) << err;
}

TEST_F(CliSpeculative, BadCombinationsAndFilesAreRefused) {
    std::string err;
    EXPECT_EQ(ds4({"--dspark"}, &err).exit_code, 2);
    EXPECT_NE(err.find("--dspark needs --mtp"), std::string::npos) << err;
    EXPECT_NE(ds4({"--mtp", mtp_, "--mtp-draft", "17"}, &err).exit_code, 0);
    EXPECT_NE(err.find("--mtp-draft"), std::string::npos) << err;
    // The model file has no head; a DSpark file read as MTP has none either.
    EXPECT_NE(ds4({"--mtp", model_}, &err).exit_code, 0);
    EXPECT_NE(err.find("no MTP head"), std::string::npos) << err;
    EXPECT_NE(ds4({"--mtp", dspark_}, &err).exit_code, 0);
    EXPECT_NE(err.find(dspark_), std::string::npos) << err;
    EXPECT_NE(ds4({"--mtp", mtp_, "--dspark"}, &err).exit_code, 0);
    EXPECT_NE(err.find(mtp_), std::string::npos) << err;
}

// /save keeps the drafter's state with the conversation (the state's drafter section) and /load
// in a new process restores it ("drafter state restored"): the next turn's text and its drafts
// line are those of the process that saved and loaded it without restarting. A file saved
// without --mtp has no section: loaded with --mtp, the drafter starts again.
TEST_F(CliSpeculative, SaveAndLoadKeepTheDrafterState) {
    auto chat = [&](const std::string& script, std::vector<std::string> extra, std::string* err) {
        const std::string in = dir_->file("chat.in"), e = dir_->file("chat.err");
        std::ofstream(in) << script;
        std::vector<std::string> a = {binary("ds4"), "-m", model_, "--ctx", "512", "--temp", "0", "-n", "24",
                                      "--nothink", "--threads", "2", "--prefill-chunk", "16"};
        a.insert(a.end(), extra.begin(), extra.end());
        std::string cmd = "exec";
        for (const auto& s : a) cmd.append(" '").append(s).append("'");
        cmd += " <'" + in + "' 2>'" + e + "'";
        const RunResult r = run_command({"/bin/sh", "-c", cmd});
        *err = run_command({"/bin/cat", e}).output;
        return r;
    };
    auto drafts = [](const std::string& err) {
        std::vector<std::string> lines;
        for (size_t at = err.find("drafts: "); at != std::string::npos; at = err.find("drafts: ", at + 1))
            lines.push_back(err.substr(at, err.find('\n', at) - at));
        return lines;
    };
    const std::vector<std::string> mtp = {"--mtp", mtp_, "--mtp-draft", "3", "--mtp-margin", "0"};
    const std::string saved = dir_->file("conv.kv");
    std::string err1, err2;
    const RunResult one = chat("Tell me about the sea.\n/save " + saved + "\n/load " + saved + "\nAnd then?\n/quit\n",
                               mtp, &err1);
    ASSERT_EQ(one.exit_code, 0) << err1;
    EXPECT_NE(err1.find("drafter state restored"), std::string::npos) << err1;
    const RunResult two = chat("/load " + saved + "\nAnd then?\n/quit\n", mtp, &err2);
    ASSERT_EQ(two.exit_code, 0) << err2;
    EXPECT_NE(err2.find("drafter state restored"), std::string::npos) << err2;
    ASSERT_FALSE(two.output.empty());
    // The second process prints the second turn only.
    ASSERT_GE(one.output.size(), two.output.size());
    EXPECT_EQ(one.output.substr(one.output.size() - two.output.size()), two.output);
    const auto d1 = drafts(err1), d2 = drafts(err2);
    ASSERT_EQ(d1.size(), 2u) << err1;
    ASSERT_EQ(d2.size(), 1u) << err2;
    EXPECT_EQ(d2[0], d1[1]);

    std::string err3, err4;
    ASSERT_EQ(chat("Tell me about the sea.\n/save " + saved + "\n/quit\n", {}, &err3).exit_code, 0) << err3;
    const RunResult plain = chat("/load " + saved + "\nAnd then?\n/quit\n", mtp, &err4);
    ASSERT_EQ(plain.exit_code, 0) << err4;
    EXPECT_NE(err4.find("loaded "), std::string::npos) << err4;
    EXPECT_EQ(err4.find("drafter state restored"), std::string::npos) << err4;
    EXPECT_EQ(plain.output, two.output);  // the drafts never change the text
}

}  // namespace
}  // namespace ds4::test

namespace ds4::test {
namespace {

// GLM 5.2 (issue 32 item 3): --glm-mtp drafts with the MTP block embedded in the model file
// and prints exactly the plain greedy text at every depth and prefill chunk; the flag is refused
// on a file without the block and on a DeepSeek V4 model, and --mtp FILE on a GLM model.
TEST(CliGlmSpeculative, GlmMtpPrintsThePlainGreedyText) {
    TempDir dir;
    const std::string glm = dir.file("glm.gguf"), bare = dir.file("bare.gguf");
    for (const auto& [path, mtp] : {std::pair{glm, true}, std::pair{bare, false}}) {
        std::vector<std::string> a = {binary("ds4-gguf-gen"), "-q", "--arch", "glm-dsa", "--preset", "tiny", "-o", path};
        if (mtp) a.push_back("--mtp");
        const RunResult g = run_command(a);
        ASSERT_EQ(g.exit_code, 0) << g.output;
    }
    auto ds4 = [&](const std::string& model, std::vector<std::string> extra, std::string* err = nullptr) {
        std::vector<std::string> a = {binary("ds4"), "-m", model, "-p", "Tell me about the sea.", "--ctx", "256",
                                      "--temp", "0", "-n", "24", "--nothink", "--threads", "2"};
        a.insert(a.end(), extra.begin(), extra.end());
        std::string cmd;
        for (const auto& s : a) cmd.append("'").append(s).append("' ");
        const std::string e = dir.file("err.txt");
        const RunResult r = run_command({"/bin/sh", "-c", "exec " + cmd + "2>" + e});
        if (err) *err = run_command({"/bin/cat", e}).output;
        return r;
    };
    const RunResult plain = ds4(glm, {});
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    ASSERT_FALSE(plain.output.empty());
    for (const std::vector<std::string>& extra :
         {std::vector<std::string>{"--glm-mtp"}, {"--glm-mtp", "--mtp-draft", "4", "--mtp-margin", "0"},
          {"--glm-mtp", "--mtp-draft", "8", "--mtp-margin", "0", "--prefill-chunk", "1"}}) {
        std::string err;
        const RunResult r = ds4(glm, extra, &err);
        ASSERT_EQ(r.exit_code, 0) << err;
        EXPECT_EQ(r.output, plain.output) << extra.back();
        EXPECT_NE(err.find("speculative decoding: GLM MTP block"), std::string::npos) << err;
    }
    std::string err;
    EXPECT_EQ(ds4(glm, {"--glm-mtp", "--mtp-draft", "4", "--mtp-margin", "0"}, &err).exit_code, 0) << err;
    EXPECT_NE(err.find("drafts: "), std::string::npos) << err;
    EXPECT_NE(ds4(bare, {"--glm-mtp"}, &err).exit_code, 0);
    EXPECT_NE(err.find("has no MTP block"), std::string::npos) << err;
    EXPECT_NE(ds4(glm, {"--mtp", glm}, &err).exit_code, 0);
    EXPECT_NE(err.find("use --glm-mtp"), std::string::npos) << err;
}

}  // namespace
}  // namespace ds4::test
