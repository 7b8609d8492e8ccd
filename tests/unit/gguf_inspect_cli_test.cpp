// `ds4 --inspect` end to end: the built binary on files written by the Writer.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gguf/writer.h"
#include "support/gguf_test_util.h"

namespace ds4::gguf {
namespace {

using test::ScratchDir;

struct CliRun {
    int code = -1;
    std::string out, err;
};

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Runs build/bin/ds4 with `args` (already shell-quoted) in directory `cwd`.
CliRun ds4(const ScratchDir& dir, const std::string& args, const std::string& cwd = ".") {
    const std::string bin = std::string(DS4_BIN_DIR) + "/ds4";
    const std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
    const std::string cmd =
        "cd '" + cwd + "' && '" + bin + "' " + args + " >'" + out + "' 2>'" + err + "'";
    const int st = std::system(cmd.c_str());
    CliRun r;
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
}

std::string write_model(const ScratchDir& dir) {
    const std::string path = dir.file("small.gguf");
    Writer w(path);
    w.set("general.architecture", Value::str("deepseek4"));
    w.set("test.answer", Value::u32(42));
    std::vector<int32_t> ids(100);
    for (int i = 0; i < 100; ++i) ids[size_t(i)] = 1000 + i;
    w.set("test.ids", Value::array_i32(ids));
    w.add_tensor("blk.0.attn_norm.weight", TensorType::F32, {64});
    w.add_tensor("token_embd.weight", TensorType::Q8_0, {64, 4});
    w.begin_data();
    w.write_tensor("blk.0.attn_norm.weight", test::pattern(256, 1));
    w.write_tensor("token_embd.weight", test::pattern(4 * 2 * 34, 2));
    w.finish();
    return path;
}

void expect_has(const std::string& text, const std::string& what) {
    EXPECT_NE(text.find(what), std::string::npos) << "missing: " << what << "\nin:\n" << text;
}

TEST(GgufInspectCli, PrintsMetadataAndTensorTable) {
    ScratchDir dir;
    const std::string path = write_model(dir);
    for (const std::string& args : {"--inspect '" + path + "'", "-m '" + path + "' --inspect"}) {
        SCOPED_TRACE(args);
        const CliRun r = ds4(dir, args);
        // Not a runnable model (no deepseek4 keys): the file is still listed, then one line
        // says why the engine cannot run it.
        EXPECT_EQ(r.code, 1) << r.err;
        EXPECT_EQ(r.err.rfind("ds4: ", 0), 0u) << r.err;
        EXPECT_NE(r.err.find("deepseek4."), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "exactly one line: " << r.err;
        expect_has(r.out, "GGUF version 3, alignment 32");
        expect_has(r.out, "general.architecture");
        expect_has(r.out, "\"deepseek4\"");
        expect_has(r.out, "test.answer");
        expect_has(r.out, "i32[100]");
        expect_has(r.out, "[1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, ... 92 more]");
        expect_has(r.out, "blk.0.attn_norm.weight");
        expect_has(r.out, "token_embd.weight");
        expect_has(r.out, "q8_0");
        expect_has(r.out, "[64, 4]");
        // 64 + 256 parameters; 256 (f32) + 8 q8_0 blocks of 34 bytes.
        expect_has(r.out, "total: 320 parameters, 528 bytes of tensor data");
    }
}

TEST(GgufInspectCli, GeneratedModelShowsTheDerivedConfiguration) {
    ScratchDir dir;
    const std::string path = dir.file("tiny.gguf");
    const std::string gen = std::string(DS4_BIN_DIR) + "/ds4-gguf-gen -q --preset tiny -o '" + path + "'";
    ASSERT_EQ(std::system(gen.c_str()), 0);
    const CliRun r = ds4(dir, "-m '" + path + "' --inspect");
    EXPECT_EQ(r.code, 0) << r.err;
    expect_has(r.out, "derived configuration (deepseek4):");
    expect_has(r.out, "compress ratios: 0,0,4,128,4,128");
    expect_has(r.out, "the engine can run this file");
}

// The full-size PRO shape (spec/ARCHITECTURE.md §1.3) as a sparse file: --inspect reads it
// without touching the holes and reports the PRO configuration as runnable.
TEST(GgufInspectCli, SparseFullProFileIsReported) {
    ScratchDir dir;
    const std::string path = dir.file("pro.gguf");
    const std::string gen =
        std::string(DS4_BIN_DIR) + "/ds4-gguf-gen -q --preset pro --sparse -o '" + path + "'";
    ASSERT_EQ(std::system(gen.c_str()), 0);
    const CliRun r = ds4(dir, "-m '" + path + "' --inspect");
    EXPECT_EQ(r.code, 0) << r.err;
    expect_has(r.out, "derived configuration (deepseek4):");
    expect_has(r.out, "compress ratios: 128,128,4,128,4,128,");
    expect_has(r.out, "[7168, 3072, 384]");
    expect_has(r.out, "blk.60.ffn_down_exps.weight");
    expect_has(r.out, "the engine can run this file");
}

TEST(GgufInspectCli, BrokenFileIsOneLineAndExitCodeOne) {
    ScratchDir dir;
    const std::string path = write_model(dir);
    auto bytes = test::read_all(path);
    // Cut one byte off token_embd's data (the file itself ends after alignment padding).
    bytes.resize(File::open(path)->data_offset() + 527);
    const std::string bad = dir.file("bad.gguf");
    test::write_all(bad, bytes);
    const CliRun r = ds4(dir, "--inspect '" + bad + "'");
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err.rfind("ds4: " + bad + ": at byte ", 0), 0u) << r.err;
    expect_has(r.err, "tensor 'token_embd.weight' data is out of range");
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "exactly one line: " << r.err;
}

TEST(GgufInspectCli, MissingDefaultModelExplainsHowToGetOne) {
    ScratchDir dir;
    const std::string cwd = dir.file("empty");
    std::filesystem::create_directory(cwd);
    const CliRun r = ds4(dir, "--inspect", cwd);
    EXPECT_EQ(r.code, 1);
    expect_has(r.err, "ds4flash.gguf not found");
    expect_has(r.err, "scripts/run-default.sh");
}

TEST(GgufInspectCli, HelpDocumentsTheOptions) {
    ScratchDir dir;
    const CliRun r = ds4(dir, "--help");
    EXPECT_EQ(r.code, 0);
    expect_has(r.out, "-m,--model");
    expect_has(r.out, "--inspect");
    expect_has(r.out, "ds4flash.gguf");
}

}  // namespace
}  // namespace ds4::gguf
