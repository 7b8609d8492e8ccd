// decode_bytes: the weight bytes one decode step reads from a deepseek4 or glm-dsa GGUF, to
// turn decode speed into a share of memory bandwidth (bench/side_by_side.sh). Per token and layer it
// counts every dense tensor in full (attention, compressors, indexer, router, norms, HC), the
// shared expert in full, n_expert_used of the n_expert routed experts, one row of the token
// embedding and of tid2eid, and the whole output head.
//
//   decode_bytes MODEL.gguf [--ctx N]...
//
// Prints a breakdown, then "n_vocab V" and "bytes_per_token N" (everything above: what an
// engine that always runs every product reads). Per --ctx N, also "bytes_per_token_at N B":
// what ds4 reads for a token decoded after N tokens of context. It skips a ratio-4 layer's
// indexer queries and weights (indexer.attn_q_b, indexer.proj) while the token sees no more
// than top-k compressed rows ((N + 1) / 4 <= top_k: model/attention.cpp); the breakdown
// stays the full count. GLM 5.2 (glm-dsa) computes its indexer queries at every context, so
// there the two counts agree; its embedded MTP block (blk.<n_layer>) is not counted.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/reader.h"
#include "gguf/tensor_type.h"
#include "model/deepseek4/config.h"
#include "model/glm/config.h"

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// Layer index of a "blk.L." tensor name, or -1.
int layer_of(const std::string& name) {
    if (name.rfind("blk.", 0) != 0) return -1;
    return std::stoi(name.substr(4));
}

int run(const std::string& path, const std::vector<int64_t>& ctxs) {
    const auto file = ds4::gguf::File::open(path);
    // The few numbers of the family's config that the count needs.
    struct {
        uint32_t n_layer = 0, n_expert = 0, n_expert_used = 0, n_vocab = 0, indexer_top_k = 0;
        bool glm = false;
        ds4::deepseek4::ModelConfig v4;
        uint32_t compress_ratio(uint32_t il) const { return glm ? 0 : v4.compress_ratio(il); }
    } cfg;
    if (file->get_string("general.architecture") == "glm-dsa") {
        const auto g = ds4::glm::GlmConfig::from_gguf(*file);
        cfg.glm = true;
        cfg.n_layer = g.n_layer, cfg.n_expert = g.n_expert, cfg.n_expert_used = g.n_expert_used;
        cfg.n_vocab = g.n_vocab, cfg.indexer_top_k = g.indexer_top_k;
    } else {
        cfg.v4 = ds4::deepseek4::ModelConfig::from_gguf(*file);
        cfg.n_layer = cfg.v4.n_layer, cfg.n_expert = cfg.v4.n_expert, cfg.n_expert_used = cfg.v4.n_expert_used;
        cfg.n_vocab = cfg.v4.n_vocab, cfg.indexer_top_k = cfg.v4.indexer_top_k;
    }
    double dense = 0, routed = 0, shared = 0, embd = 0, output = 0;
    std::map<std::string, double> by_type;  // the same bytes, per tensor type
    std::vector<double> skipped(ctxs.size(), 0.0);  // per --ctx: indexer bytes ds4 skips there
    for (const auto& t : file->tensors()) {
        const double bytes = double(t.n_bytes);
        double read = bytes;
        if (cfg.glm && layer_of(t.name) >= int(cfg.n_layer)) continue;  // the MTP block
        if (t.name == "token_embd.weight" || contains(t.name, "tid2eid")) {
            read = bytes / double(t.ne[1]);  // one row: the current token's
            embd += read;
        } else if (contains(t.name, "_exps")) {
            if (t.ne[2] != int64_t(cfg.n_expert))
                ds4::fail("{}: {} has shape {}, expected {} experts in ne[2]", path, t.name,
                          t.shape_string(), cfg.n_expert);
            read = bytes * cfg.n_expert_used / cfg.n_expert;
            routed += read;
        } else if (contains(t.name, "_shexp")) {
            shared += bytes;
        } else if (t.name == "output.weight") {
            output += bytes;
        } else {
            dense += bytes;
            const int layer = layer_of(t.name);
            const bool indexer_query = contains(t.name, "indexer.attn_q_b") || contains(t.name, "indexer.proj");
            if (indexer_query && layer >= 0 && layer < int(cfg.n_layer) && cfg.compress_ratio(uint32_t(layer)) == 4)
                for (size_t i = 0; i < ctxs.size(); ++i)
                    if ((ctxs[i] + 1) / 4 <= int64_t(cfg.indexer_top_k)) skipped[i] += bytes;
        }
        by_type[ds4::tensor_type_name(t.type)] += read;
    }
    const double mib = 1024.0 * 1024.0;
    std::printf("%s: %u layers, %u of %u routed experts per token\n", path.c_str(), cfg.n_layer,
                cfg.n_expert_used, cfg.n_expert);
    std::printf("  dense (attention, compressors, indexer, router, HC, norms) %10.2f MiB\n", dense / mib);
    std::printf("  routed experts used                                        %10.2f MiB\n", routed / mib);
    std::printf("  shared experts                                             %10.2f MiB\n", shared / mib);
    std::printf("  output head                                                %10.2f MiB\n", output / mib);
    std::printf("  embedding + tid2eid rows                                   %10.4f MiB\n", embd / mib);
    std::printf("by tensor type:\n");
    for (const auto& [type, bytes] : by_type) std::printf("  %-10s %10.2f MiB\n", type.c_str(), bytes / mib);
    std::printf("n_vocab %u\n", cfg.n_vocab);
    const double all = dense + routed + shared + output + embd;
    std::printf("bytes_per_token %.0f\n", all);
    for (size_t i = 0; i < ctxs.size(); ++i)
        std::printf("bytes_per_token_at %lld %.0f\n", (long long)ctxs[i], all - skipped[i]);
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
