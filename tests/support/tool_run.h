// Helpers for oracle tests that drive binaries (ds4-gguf-gen, ds4-oracle, later ds4): a
// scratch directory, running a command and capturing its output, token-id files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ds4::test {

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
    std::filesystem::path path_;
};

struct RunResult {
    int exit_code = -1;  // the process's exit status; -1 if it did not exit normally
    std::string output;  // stdout and stderr, interleaved
};

// Runs argv[0] with the other arguments (no shell interpretation of their contents).
RunResult run_command(const std::vector<std::string>& argv);

// DS4_BIN_DIR/<name>: where the build puts our binaries and ds4-oracle.
std::string binary(const std::string& name);

// n token ids uniform in [0, n_vocab) from a fixed generator, written whitespace-separated.
std::vector<int32_t> random_token_ids(int64_t n, int64_t n_vocab, uint64_t seed);
void write_token_ids(const std::string& path, const std::vector<int32_t>& ids);

}  // namespace ds4::test
