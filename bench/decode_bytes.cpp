// decode_bytes: the weight bytes one decode step reads from a deepseek4 or glm-dsa GGUF, to
// turn decode speed into a share of memory bandwidth (bench/side_by_side.sh). Per token and layer it
// counts every dense tensor in full (attention, compressors, indexer, router, norms, HC), the
// shared expert in full, n_expert_used of the n_expert routed experts, one row of the token
// embedding and of tid2eid, and the whole output head.
//
//   decode_bytes MODEL.gguf [--ctx N]...
//
// Prints a breakdown, then "n_vocab V", "bytes_per_token N" (everything above: what an
// engine that always runs every product reads), "routed_bytes_per_row E" (what each further
// row of a batched step adds at most) and "prefill_ops_per_token P" (2 x the weight values a
// prompt token multiplies: dense, shared and routed products, not the head). Per --ctx N,
// also "bytes_per_token_at N B": what ds4 reads for a token decoded after N tokens of context. It skips a ratio-4 layer's
// indexer queries and weights (indexer.attn_q_b, indexer.proj) while the token sees no more
// than top-k compressed rows ((N + 1) / 4 <= top_k: model/attention.cpp); the breakdown
// stays the full count. GLM 5.2 (glm-dsa) computes its indexer queries at every context, so
// there the two counts agree; its embedded MTP block (blk.<n_layer>) is not counted.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/reader.h"
#include "machine_limits.h"  // tools/ds4-bench: the count, shared with ds4-bench's limits

namespace {

int run(const std::string& path, const std::vector<int64_t>& ctxs) {
    const auto file = ds4::gguf::File::open(path);
    const ds4::bench::StepCount c = ds4::bench::count_step(*file);
    const double mib = 1024.0 * 1024.0;
    std::printf("%s: %u layers, %u of %u routed experts per token\n", path.c_str(), c.n_layer,
                c.n_expert_used, c.n_expert);
    std::printf("  dense (attention, compressors, indexer, router, HC, norms) %10.2f MiB\n", c.dense / mib);
    std::printf("  routed experts used                                        %10.2f MiB\n", c.routed / mib);
    std::printf("  shared experts                                             %10.2f MiB\n", c.shared / mib);
    std::printf("  output head                                                %10.2f MiB\n", c.output / mib);
    std::printf("  embedding + tid2eid rows                                   %10.4f MiB\n", c.embd / mib);
    std::printf("by tensor type:\n");
    for (const auto& [type, bytes] : c.by_type) std::printf("  %-10s %10.2f MiB\n", type.c_str(), bytes / mib);
    std::printf("n_vocab %u\n", c.n_vocab);
    std::printf("bytes_per_token %.0f\n", c.all());
    // Per row beyond the first in a step of several (sequences or verification rows).
    std::printf("routed_bytes_per_row %.0f\n", c.routed);
    // 2 x the weight values a prompt token multiplies (prefill's int8 work per token).
    std::printf("prefill_ops_per_token %.0f\n", 2 * c.prefill_macs);
    for (const int64_t ctx : ctxs) std::printf("bytes_per_token_at %lld %.0f\n", (long long)ctx, c.at(ctx));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const char* usage = "usage: decode_bytes MODEL.gguf [--ctx N]...\n";
    if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
        std::fprintf(stderr, "%s", usage);
        return argc == 2 ? 0 : 2;
    }
    std::vector<int64_t> ctxs;
    for (int i = 2; i < argc; i += 2) {
        char* end = nullptr;
        const long long v = i + 1 < argc ? std::strtoll(argv[i + 1], &end, 10) : -1;
        if (std::string(argv[i]) != "--ctx" || i + 1 >= argc || *end != '\0' || v < 0) {
            std::fprintf(stderr, "decode_bytes: bad argument '%s'\n%s", argv[i], usage);
            return 2;
        }
        ctxs.push_back(v);
    }
    try {
        return run(argv[1], ctxs);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "decode_bytes: %s\n", e.what());
    }
    return 1;
}
