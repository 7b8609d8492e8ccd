// forward_bench: prefill and decode speed of the CPU forward pass, as wall-clock tokens/s and
// as CPU seconds per token (the sum over threads, which other processes sharing the cores do
// not inflate much, so runs on a busy machine stay comparable).
//
//   forward_bench -m FILE [--prefill 512] [--decode 16] [--threads 2] [--warm 0] [--reps 1] [--no-mmap]
//                [--chunk 512[,2048...]] [--profile]
//
// Token ids are a fixed pseudo-random sequence. Before timing, every page of the model's
// mapping is touched (as llama.cpp's MAP_POPULATE does at load; first-touch page faults cost
// several times the streaming itself on a VM), and --warm 1 also runs one throwaway prefill.
// Decode is greedy from the prefill.
//
// --profile: after each repetition, where its decode time went (ops::matvec_profile): per
// weight format, the bytes a token reads and the thread time spent on them, so the GB/s each
// format streams at in place; then the products' wall time against the rest (norms,
// attention, routing, waits between parallel regions).
#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/thread_count.h"
#include "gguf/tensor_type.h"
#include "model/deepseek4/model.h"
#include "model/session.h"
#include "ops/matmul.h"

namespace {

double cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double wall_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Reads one byte of every page of the mappings of `path` (from /proc/self/maps).
void touch_mapping(const std::string& path) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    volatile uint8_t sink = 0;
    while (std::getline(maps, line)) {
        if (line.size() < path.size() || line.compare(line.size() - path.size(), path.size(), path) != 0)
            continue;
        std::istringstream in(line);
        uintptr_t b = 0, e = 0;
        char dash = 0;
        in >> std::hex >> b >> dash >> e;
        for (uintptr_t p = b; p < e; p += 4096) sink = sink + *reinterpret_cast<const uint8_t*>(p);
    }
}

void print_profile(const ds4::ops::MatvecProfile& p, int64_t tokens, double wall, int threads) {
    std::printf("  decode profile, per token (%.2f ms wall):\n%s", 1e3 * wall / double(tokens),
                ds4::ops::matvec_profile_table(p, double(tokens), wall, threads, "  ").c_str());
}

}  // namespace

int main(int argc, char** argv) try {
    std::string path;
    int64_t prefill = 512, decode = 16;
    int threads = 2, reps = 1;
    std::vector<int64_t> chunks{512};
    bool warm = false, no_mmap = false, profile = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--no-mmap" || a == "--profile") {
            (a == "--no-mmap" ? no_mmap : profile) = true;
            continue;
        }
        if (i + 1 >= argc) ds4::fail("option {} needs a value", a);
        const std::string v = argv[++i];
        if (a == "-m") path = v;
        else if (a == "--prefill") prefill = std::stoll(v);
        else if (a == "--decode") decode = std::stoll(v);
        else if (a == "--threads") threads = ds4::resolve_threads(std::stoll(v));
        else if (a == "--warm") warm = std::stoi(v) != 0;
        else if (a == "--reps") reps = std::stoi(v);
        else if (a == "--chunk") {
            // comma-separated: reps alternate over the sizes (A/B in one process)
            chunks.clear();
            for (size_t p = 0; p < v.size();) {
                const size_t e = std::min(v.find(',', p), v.size());
                chunks.push_back(std::stoll(v.substr(p, e - p)));
                p = e + 1;
            }
        }
        else ds4::fail("unknown option {}", a);
    }
    if (path.empty())
        ds4::fail("usage: forward_bench -m FILE [--prefill N] [--decode N] [--threads N] [--warm 0|1] "
                  "[--reps N] [--chunk N[,N...]] [--no-mmap] [--profile]");
    auto model = ds4::deepseek4::Model::load(
        path, {.threads = threads, .load = no_mmap ? ds4::gguf::File::Load::Copy : ds4::gguf::File::Load::Map});
    if (!no_mmap) {
        char resolved[4096];
        touch_mapping(realpath(path.c_str(), resolved) ? resolved : path);
    }
    const auto& cfg = model->config();
    std::mt19937 rng(1);
    std::vector<int32_t> ids(static_cast<size_t>(prefill));
    for (auto& t : ids) t = int32_t(rng() % cfg.n_vocab);
    ds4::model::SessionOptions opt;
    opt.ctx = prefill + decode + 1;
    if (warm) {
        opt.prefill_chunk = chunks[0];  // the timed reps' buffers, grown once here
        ds4::model::Session s(*model, opt);
        std::vector<float> logits;
        s.eval(ids, &logits);
    }
    for (int rep = 0; rep < reps; ++rep) {
        opt.prefill_chunk = chunks[size_t(rep) % chunks.size()];
        ds4::model::Session s(*model, opt);
        std::vector<float> logits;
        double w0 = wall_seconds(), c0 = cpu_seconds();
        s.eval(ids, &logits);
        const double pw = wall_seconds() - w0, pc = cpu_seconds() - c0;
        if (profile) ds4::ops::matvec_profile_open();
        w0 = wall_seconds();
        c0 = cpu_seconds();
        for (int64_t i = 0; i < decode; ++i) {
            const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
            s.eval({next}, &logits);
        }
        const double dw = wall_seconds() - w0, dc = cpu_seconds() - c0;
        const ds4::ops::MatvecProfile prof = profile ? ds4::ops::matvec_profile_close() : ds4::ops::MatvecProfile{};
        std::printf("prefill %lld: %.2f t/s wall, %.2f ms cpu/token | decode %lld: %.2f t/s wall, "
                    "%.2f ms cpu/token  (%d threads, chunk %lld)\n",
                    (long long)prefill, double(prefill) / pw, 1e3 * pc / double(prefill),
                    (long long)decode, decode ? double(decode) / dw : 0.0,
                    decode ? 1e3 * dc / double(decode) : 0.0, threads,
                    (long long)opt.prefill_chunk);
        if (profile && decode > 0) print_profile(prof, decode, dw, threads);
        std::fflush(stdout);
    }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "forward_bench: %s\n", e.what());
    return 1;
}
