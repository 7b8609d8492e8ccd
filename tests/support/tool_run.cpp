#include "support/tool_run.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <random>

#include "common/error.h"

namespace ds4::test {
namespace {

// Single-quotes an argument for /bin/sh.
std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) {
        if (c == '\'') q += "'\\''";
        else q += c;
    }
    return q + "'";
}

}  // namespace

TempDir::TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "ds4-oracle-XXXXXX").string();
    if (mkdtemp(templ.data()) == nullptr) fail("cannot create a temporary directory from {}", templ);
    path_ = templ;
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

RunResult run_command(const std::vector<std::string>& argv) {
    std::string cmd;
    for (const auto& a : argv) cmd += quote(a) + ' ';
    cmd += "2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    if (pipe == nullptr) fail("cannot run {}", cmd);
    RunResult r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
    const int status = pclose(pipe);
    r.exit_code = (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
    return r;
}

std::string binary(const std::string& name) { return std::string(DS4_BIN_DIR) + "/" + name; }

std::vector<int32_t> random_token_ids(int64_t n, int64_t n_vocab, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    // Plain modulo instead of a distribution: the same ids with every standard library.
    for (auto& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(n_vocab));
    return ids;
}

void write_token_ids(const std::string& path, const std::vector<int32_t>& ids) {
    std::ofstream out(path);
    for (int32_t id : ids) out << id << ' ';
    out << '\n';
    if (!out) fail("{}: cannot write token ids", path);
}

}  // namespace ds4::test
