#include "inspect.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "gguf/reader.h"
#include "model/config.h"
#include "model/layout.h"

namespace ds4::cli {
namespace {

std::string human_bytes(uint64_t n) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = double(n);
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, ++u;
    return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.1f} {}", v, units[u]);
}

std::string type_column(const gguf::Value& v) {
    if (!v.is_array()) return gguf::value_type_name(v.type);
    return fmt::format("{}[{}]", gguf::value_type_name(v.elem_type), v.elems.size());
}

}  // namespace

void print_inspect(const gguf::File& f, std::FILE* out) {
    fmt::print(out, "file: {} ({} bytes, {})\n", f.path(), f.file_size(),
               human_bytes(f.file_size()));
    fmt::print(out, "GGUF version {}, alignment {}, tensor data at byte {}\n", f.version(),
               f.alignment(), f.data_offset());

    const auto& md = f.metadata();
    size_t key_w = 3, type_w = 4;
    for (const auto& [k, v] : md) {
        key_w = std::max(key_w, k.size());
        type_w = std::max(type_w, type_column(v).size());
    }
    fmt::print(out, "\nmetadata: {} keys\n", md.size());
    fmt::print(out, "  {:<{}}  {:<{}}  {}\n", "key", key_w, "type", type_w, "value");
    for (const auto& [k, v] : md)
        fmt::print(out, "  {:<{}}  {:<{}}  {}\n", k, key_w, type_column(v), type_w, v.to_string());

    const auto& ts = f.tensors();
    size_t name_w = 4, shape_w = 5;
    for (const auto& t : ts) {
        name_w = std::max(name_w, t.name.size());
        shape_w = std::max(shape_w, t.shape_string().size());
    }
    fmt::print(out, "\ntensors: {}\n", ts.size());
    fmt::print(out, "  {:<{}}  {:<7}  {:<{}}  {:>14}  {:>14}\n", "name", name_w, "type", "shape",
               shape_w, "offset", "bytes");
    uint64_t params = 0, bytes = 0;
    std::map<std::string, std::pair<size_t, uint64_t>> per_type;  // count, bytes
    for (const auto& t : ts) {
        const std::string type = tensor_type_name(t.type);
        fmt::print(out, "  {:<{}}  {:<7}  {:<{}}  {:>14}  {:>14}\n", t.name, name_w, type,
                   t.shape_string(), shape_w, t.offset, t.n_bytes);
        params += uint64_t(t.n_elements());
        bytes += t.n_bytes;
        auto& pt = per_type[type];
        ++pt.first;
        pt.second += t.n_bytes;
    }
    fmt::print(out, "\nby type:\n");
    for (const auto& [type, cb] : per_type)
        fmt::print(out, "  {:<7}  {:>6} tensors  {:>14} bytes ({})\n", type, cb.first, cb.second,
                   human_bytes(cb.second));
    fmt::print(out, "\ntotal: {} parameters, {} bytes of tensor data ({})\n", params, bytes,
               human_bytes(bytes));
}

// The configuration the engine derives from the metadata, or why it cannot run the file.
static void print_config(const gguf::File& f, std::FILE* out) {
    const model::ModelConfig c = model::ModelConfig::from_gguf(f);
    model::validate_tensors(f, c);
    std::fprintf(out, "\nderived configuration (deepseek4):\n");
    std::fprintf(out, "  layers %u, n_embd %u, vocab %u, hc streams %u (sinkhorn %u)\n", c.n_layer,
                 c.n_embd, c.n_vocab, c.hc, c.sinkhorn_iters);
    std::fprintf(out, "  attention: %u heads x %u (rope %u), q rank %u, output %u groups x %u, window %u\n",
                 c.n_head, c.head_dim, c.rope_dim, c.q_lora_rank, c.o_groups, c.o_lora_rank, c.window);
    std::fprintf(out, "  indexer: %u heads x %u, top-k %u\n", c.indexer_heads, c.indexer_dim,
                 c.indexer_top_k);
    std::fprintf(out, "  moe: %u experts (%u used, %u shared) x ff %u, %u hash layers, scale %g\n",
                 c.n_expert, c.n_expert_used, c.n_expert_shared, c.expert_ff, c.n_hash_layers,
                 double(c.expert_weights_scale));
    std::string ratios;
    for (uint32_t r : c.compress_ratios) ratios += (ratios.empty() ? "" : ",") + std::to_string(r);
    std::fprintf(out, "  compress ratios: %s\n", ratios.c_str());
    std::fprintf(out, "  rope base %g; compressed layers base %g + YaRN x%g (orig ctx %llu)\n",
                 double(c.rope_base), double(c.compress_rope_base), double(c.yarn_factor),
                 (unsigned long long)c.yarn_orig_ctx);
    std::fprintf(out, "  every tensor matches the layout: the engine can run this file\n");
}

int run_inspect(const std::string& path) {
    const auto f = gguf::File::open(path);
    print_inspect(*f, stdout);
    std::fflush(stdout);
    print_config(*f, stdout);
    return 0;
}

}  // namespace ds4::cli
