// range_memory: the memory a process holding a layer range of a model takes, against that
// range's share of the file (docs/PERFORMANCE.md, "Layer ranges"). For each range it loads the
// model in a fresh child process (so one load's pages do not count for the next), with the
// weights read into memory (--no-mmap: only the range's tensors are read) or mapped (then it
// touches every byte of the range's tensors, the most a mapped range can hold), and reports
// the growth of the resident set.
//
//   range_memory MODEL [--mmap] RANGE...          e.g. range_memory flash4.gguf 0:1 2:output 0:output
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/deepseek4/layout.h"
#include "model/deepseek4/model.h"

namespace {

int64_t rss_bytes() {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
    return -1;
}

// Runs in the child: prints "range share_bytes rss_growth".
int measure(const std::string& path, const std::string& range, bool map) {
    using namespace ds4;
    const int64_t before = rss_bytes();
    auto m = deepseek4::Model::load(path, {.load = map ? gguf::File::Load::Map : gguf::File::Load::Copy,
                                           .layers = range});
    int64_t share = 0;
    volatile uint64_t sink = 0;
    for (const auto& spec : deepseek4::tensor_layout(m->config())) {
        if (!deepseek4::in_range(spec, m->info().range)) continue;
        const auto& t = m->file().tensor(spec.name);
        share += int64_t(t.n_bytes);
        if (map)
            for (uint64_t off = 0; off < t.n_bytes; off += 4096) sink = sink + m->file().data(t)[off];
    }
    std::printf("%s %lld %lld %lld\n", range.c_str(), (long long)share, (long long)(rss_bytes() - before),
                (long long)m->file().file_size());
    return 0;
}

}  // namespace

int main(int argc, char** argv) try {
    if (argc < 3) {
        std::fprintf(stderr, "usage: range_memory MODEL [--mmap] RANGE...\n");
        return 2;
    }
    const std::string path = argv[1];
    bool map = false;
    std::vector<std::string> ranges;
    for (int i = 2; i < argc; ++i) {
        if (std::strcmp(argv[i], "--mmap") == 0) map = true;
        else ranges.push_back(argv[i]);
    }
    std::printf("| range | share of the file | resident growth (%s) | growth / share |\n|---|---|---|---|\n",
                map ? "mapped, every range byte touched" : "--no-mmap");
    for (const std::string& r : ranges) {
        int fds[2];
        if (pipe(fds) != 0) ds4::fail("pipe: {}", std::strerror(errno));
        std::fflush(stdout);  // the child must not print the parent's buffered lines again
        const pid_t pid = fork();
        if (pid == 0) {
            dup2(fds[1], 1);
            close(fds[0]);
            try {
                measure(path, r, map);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "range_memory: %s\n", e.what());
                _exit(1);
            }
            std::fflush(stdout);
            _exit(0);
        }
        close(fds[1]);
        char buf[256] = {};
        const ssize_t n = read(fds[0], buf, sizeof buf - 1);
        close(fds[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        char name[64];
        long long share = 0, grown = 0, size = 0;
        if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
            std::sscanf(buf, "%63s %lld %lld %lld", name, &share, &grown, &size) != 4)
            ds4::fail("range {}: the measurement failed", r);
        std::printf("| %s | %.2f GB (%.0f%%) | %.2f GB | %.2f |\n", name, double(share) / 1e9,
                    100.0 * double(share) / double(size), double(grown) / 1e9, double(grown) / double(share));
    }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "range_memory: %s\n", e.what());
    return 1;
}
