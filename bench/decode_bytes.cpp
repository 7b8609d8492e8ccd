// decode_bytes: the weight bytes one decode step reads from a deepseek4 GGUF, to turn decode
// speed into a share of memory bandwidth (bench/side_by_side.sh). Per token and layer it
// counts every dense tensor in full (attention, compressors, indexer, router, norms, HC), the
// shared expert in full, n_expert_used of the n_expert routed experts, one row of the token
// embedding and of tid2eid, and the whole output head.
//
//   decode_bytes MODEL.gguf
//
// Prints a breakdown, then "n_vocab V" and, last, "bytes_per_token N".
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "common/error.h"
#include "gguf/reader.h"
#include "gguf/tensor_type.h"
#include "model/config.h"

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

int run(const std::string& path) {
    const auto file = ds4::gguf::File::open(path);
    const auto cfg = ds4::model::ModelConfig::from_gguf(*file);
    double dense = 0, routed = 0, shared = 0, embd = 0, output = 0;
    std::map<std::string, double> by_type;  // the same bytes, per tensor type
    for (const auto& t : file->tensors()) {
        const double bytes = double(t.n_bytes);
        double read = bytes;
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
    std::printf("bytes_per_token %.0f\n", dense + routed + shared + output + embd);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
        std::fprintf(stderr, "usage: decode_bytes MODEL.gguf\n");
        return argc == 2 ? 0 : 2;
    }
    try {
        return run(argv[1]);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "decode_bytes: %s\n", e.what());
    }
    return 1;
}
