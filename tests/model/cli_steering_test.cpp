// Directional steering from the command line: ds4-steer-build writes a file ds4 and
// ds4-server load; --dir-steering-ffn 0 gives the logits of no steering bit for bit, a
// non-zero scale other ones; bad files and flags are refused with a clear error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
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

class CliSteering : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        model_ = dir_->file("tiny.gguf");
        const auto r = test::write_tiny_model(model_, test::kTinyQ8Io);
        ASSERT_EQ(r.exit_code, 0) << r.output;
        std::ofstream(dir_->file("good.txt")) << "# terse\nAnswer in one word.\nBe brief.\n";
        std::ofstream(dir_->file("bad.txt")) << "Explain at length, with many details.\n\nWrite a long essay.\n";
        test::write_token_ids(dir_->file("ids.txt"), {100, 2000, 30000, 400, 55});
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }
    static test::RunResult logits(const std::vector<std::string>& extra, const std::string& out) {
        std::vector<std::string> a = {test::binary("ds4"), "-m", model_, "--token-ids", dir_->file("ids.txt"),
                                      "--dump-logits-f32", out, "--threads", "2", "--ctx", "64"};
        a.insert(a.end(), extra.begin(), extra.end());
        return test::run_command(a);
    }
    static test::TempDir* dir_;
    static std::string model_;
};
test::TempDir* CliSteering::dir_ = nullptr;
std::string CliSteering::model_;

TEST_F(CliSteering, BuildThenSteer) {
    const std::string dirs = dir_->file("terse.f32");
    const auto b = test::run_command({test::binary("ds4-steer-build"), "-m", model_, "--good-file",
                                      dir_->file("good.txt"), "--bad-file", dir_->file("bad.txt"), "-o", dirs,
                                      "--threads", "2", "--ctx", "256"});
    ASSERT_EQ(b.exit_code, 0) << b.output;
    EXPECT_NE(b.output.find("2 good, 2 bad prompts"), std::string::npos) << b.output;
    // The tiny preset: 6 layers of n_embd 256.
    EXPECT_EQ(std::filesystem::file_size(dirs), 6u * 256u * 4u);
    const std::string side = slurp(dir_->file("terse.json"));
    EXPECT_NE(side.find("\"format\": \"ds4-directional-steering-v1\""), std::string::npos) << side;
    EXPECT_NE(side.find("\"component\": \"ffn_out\""), std::string::npos) << side;

    const std::string plain = dir_->file("plain.f32"), zero = dir_->file("zero.f32"), on = dir_->file("on.f32"),
                      attn = dir_->file("attn.f32");
    ASSERT_EQ(logits({}, plain).exit_code, 0);
    const auto z = logits({"--dir-steering-file", dirs, "--dir-steering-ffn", "0"}, zero);
    ASSERT_EQ(z.exit_code, 0) << z.output;
    EXPECT_NE(z.output.find("directional steering, 1 file: " + dirs + " (ffn 0, attn 0)"), std::string::npos)
        << z.output;
    EXPECT_EQ(slurp(zero), slurp(plain)) << "scale 0 changed the logits";
    ASSERT_EQ(logits({"--dir-steering-file", dirs}, on).exit_code, 0);  // ffn 1 by default
    EXPECT_NE(slurp(on), slurp(plain));
    ASSERT_EQ(logits({"--dir-steering-file", dirs, "--dir-steering-ffn", "0", "--dir-steering-attn", "-1"}, attn)
                  .exit_code,
              0);
    EXPECT_NE(slurp(attn), slurp(plain));
    EXPECT_NE(slurp(attn), slurp(on));
}

// /steer S changes the model's identity as the flag would: a conversation saved after it loads
// where the same steering runs, and is refused as another model's where none does.
TEST_F(CliSteering, SteerThenSaveCarriesTheNewSteering) {
    const std::string dirs = dir_->file("steer-save.f32");
    ASSERT_EQ(test::run_command({test::binary("ds4-steer-build"), "-m", model_, "--good-file", dir_->file("good.txt"),
                                 "--bad-file", dir_->file("bad.txt"), "-o", dirs, "--threads", "2", "--ctx", "256"})
                  .exit_code,
              0);
    const std::string saved = dir_->file("steered.kv");
    auto chat = [&](const std::string& scale, const std::string& input) {
        const std::string cmd = "printf '" + input + "' | " + test::binary("ds4") + " -m " + model_ +
                                " --threads 2 --ctx 256 -n 4 --nothink --dir-steering-file " + dirs +
                                " --dir-steering-ffn " + scale + " 2>&1";
        return test::run_command({"/bin/sh", "-c", cmd});
    };
    const auto s = chat("0", "/steer 1\nHello\n/save " + saved + "\n/quit\n");
    ASSERT_EQ(s.exit_code, 0) << s.output;
    ASSERT_NE(s.output.find("saved "), std::string::npos) << s.output;
    const auto same = chat("1", "/load " + saved + "\n/quit\n");
    EXPECT_NE(same.output.find("loaded "), std::string::npos) << same.output;
    const auto off = chat("0", "/load " + saved + "\n/quit\n");
    EXPECT_EQ(off.output.find("loaded "), std::string::npos) << off.output;
}

TEST_F(CliSteering, BadFilesAndFlagsAreRefused) {
    const std::string short_ = dir_->file("short.f32"), nan = dir_->file("nan.f32");
    std::vector<float> v(6 * 256, 0.0f);
    std::ofstream(short_, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), 100 * 4);
    v[7] = std::numeric_limits<float>::quiet_NaN();
    std::ofstream(nan, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * 4));

    const auto s = logits({"--dir-steering-file", short_}, dir_->file("x.f32"));
    EXPECT_NE(s.exit_code, 0);
    EXPECT_NE(s.output.find(short_ + ": 100 floats (400 bytes), but this model needs 6 layers x 256 = 1536 floats"),
              std::string::npos)
        << s.output;
    const auto n = logits({"--dir-steering-file", nan}, dir_->file("x.f32"));
    EXPECT_NE(n.exit_code, 0);
    EXPECT_NE(n.output.find(nan + ": layer 0 value 7 is not finite"), std::string::npos) << n.output;
    // The server refuses the same file before it listens.
    const auto srv = test::run_command(
        {test::binary("ds4-server"), "-m", model_, "--ctx", "64", "--port", "0", "--dir-steering-file", nan});
    EXPECT_NE(srv.exit_code, 0);
    EXPECT_NE(srv.output.find("is not finite"), std::string::npos) << srv.output;
    const auto lone = logits({"--dir-steering-ffn", "2"}, dir_->file("x.f32"));
    EXPECT_NE(lone.exit_code, 0);
    EXPECT_NE(lone.output.find("--dir-steering-ffn needs a --dir-steering-file before it"), std::string::npos)
        << lone.output;
    const auto missing = logits({"--dir-steering-file", dir_->file("none.f32")}, dir_->file("x.f32"));
    EXPECT_NE(missing.exit_code, 0);
    const auto help = test::run_command({test::binary("ds4"), "--help"});
    for (const char* flag : {"--dir-steering-file", "--dir-steering-ffn", "--dir-steering-attn"})
        EXPECT_NE(help.output.find(flag), std::string::npos) << flag;
}

}  // namespace
}  // namespace ds4
