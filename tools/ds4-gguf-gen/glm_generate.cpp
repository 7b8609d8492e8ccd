// Writing a glm-dsa model: metadata, tokenizer, tensor directory, then one tensor at a time
// (generated, converted, written), as generate.cpp does for deepseek4.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string_view>

#include "common/error.h"
#include "common/thread_pool.h"
#include "glm_gen.h"
#include "glm_vocab.h"
#include "gguf/writer.h"
#include "quant/quant.h"
#include "random_blocks.h"
#include "rng.h"
#include "scratch.h"

namespace ds4::gen {

using glm::TensorClass;
using glm::TensorSpec;

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

enum class GlmInit { Linear, Embedding, NormWeight, SmallBias };

// The initialisation rule of a tensor (glm_gen.h).
GlmInit init_for(const TensorSpec& s) {
    if (s.cls == glm::TensorClass::Embd) return GlmInit::Embedding;
    if (ends_with(s.name, "norm.weight")) return GlmInit::NormWeight;
    if (ends_with(s.name, ".bias")) return GlmInit::SmallBias;  // indexer.k_norm.bias, exp_probs_b.bias
    if (s.cls == glm::TensorClass::Norm) fail("generator: no initialisation rule for F32 tensor {}", s.name);
    return GlmInit::Linear;
}

uint64_t bytes_of(const TensorSpec& s, TensorType t) { return row_bytes(t, s.ne[0]) * uint64_t(s.n_elements() / s.ne[0]); }

void generate_row(const TensorSpec& s, GlmInit init, uint64_t seed, int64_t row, float* out) {
    Rng rng(seed, fnv1a64(s.name), uint64_t(row));
    const int64_t n = s.ne[0];
    float mean = 0.0f, std = 1.0f;
    switch (init) {
        case GlmInit::Linear: std = float(1.0 / std::sqrt(double(n))); break;
        case GlmInit::Embedding: break;
        case GlmInit::NormWeight: mean = 1.0f, std = 0.1f; break;
        case GlmInit::SmallBias: std = 0.1f; break;
    }
    for (int64_t i = 0; i < n; ++i) out[i] = mean + std * rng.normal();
}

// The tensor's bytes in storage type `type`; `data` is exactly bytes_of(s, type).
void generate_tensor(const TensorSpec& s, TensorType type, uint64_t seed, bool exact_quant, ThreadPool* pool,
                     std::span<uint8_t> data) {
    const GlmInit init = init_for(s);
    const int64_t n = s.ne[0], rows = s.n_elements() / n;
    const size_t rb = row_bytes(type, n);
    const int64_t grain = std::max<int64_t>(1, 65536 / n);  // ~64 Ki values per task
    if (!exact_quant && has_random_blocks(type) && (init == GlmInit::Linear || init == GlmInit::Embedding)) {
        const float rms = init == GlmInit::Embedding ? 1.0f : float(1.0 / std::sqrt(double(n)));
        for_rows(pool, rows, grain, [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
                Rng rng(seed, fnv1a64(s.name), uint64_t(r));
                random_blocks_row(type, rng, n, rms, data.data() + size_t(r) * rb);
            }
        });
        return;
    }
    for_rows(pool, rows, grain, [&](int64_t b, int64_t e) {
        std::vector<float> buf(static_cast<size_t>(n));
        for (int64_t r = b; r < e; ++r) {
            generate_row(s, init, seed, r, buf.data());
            quant::quantize_row(type, buf.data(), data.data() + size_t(r) * rb, n);
        }
    });
}

// Every tensor of the file: the trunk's, then the MTP block's with its indexer tensors and
// shared_head_norm, as published files carry them (its embedding and head are the trunk's).
std::vector<TensorSpec> file_tensors(const GlmPlan& p) {
    std::vector<TensorSpec> out = glm::tensor_layout(p.cfg);
    if (p.cfg.n_nextn == 0) return out;
    for (TensorSpec& s : glm::mtp_layout(p.cfg))
        if (!ends_with(s.name, "nextn.embed_tokens.weight") && !ends_with(s.name, "nextn.shared_head_head.weight"))
            out.push_back(std::move(s));
    return out;
}

std::string mib(uint64_t b) { return fmt::format("{:.1f} MiB", double(b) / (1ull << 20)); }
std::string gib(uint64_t b) { return fmt::format("{:.2f} GiB", double(b) / (1ull << 30)); }

std::string pattern(const std::vector<uint8_t>& full) {
    std::string s;
    for (size_t i = 0; i < full.size(); ++i) s += fmt::format("{}{}", i ? "," : "", int(full[i]));
    return s;
}

}  // namespace

std::string describe_glm(const GlmPlan& p) {
    const glm::GlmConfig& c = p.cfg;
    std::string types;
    for (int i = 0; i < glm::kTensorClassCount; ++i) {
        const auto cls = TensorClass(i);
        if (cls == TensorClass::Norm) continue;
        types += fmt::format("{}{}={}", types.empty() ? "" : " ", glm::tensor_class_name(cls),
                             tensor_type_name(p.type_of(cls)));
    }
    const std::vector<TensorSpec> tensors = file_tensors(p);
    uint64_t bytes = 0;
    for (const TensorSpec& s : tensors) bytes += bytes_of(s, p.type_of(s.cls));
    return fmt::format(
        "glm-dsa preset {} seed {}{}\n"
        "  layers {} ({} dense), n_embd {}, vocab {}, context {}{}\n"
        "  attention: {} heads, q_lora {}, kv_lora {}, nope {} + rope {}, v_head {}\n"
        "  indexer: {} heads x {}, top-k {}, key LayerNorm eps {}; full layers {}\n"
        "  ffn: dense {}; {} experts x ff {}, {} used, {} shared, scale {}\n"
        "  types: {}\n"
        "  {} tensors, {} of tensor data ({})",
        p.preset, p.seed, p.sparse ? ", sparse" : "", c.n_layer, c.n_dense_lead, c.n_embd, c.n_vocab,
        c.context_length, c.n_nextn ? fmt::format(", MTP block blk.{}", c.n_layer) : "", c.n_head, c.q_lora_rank,
        c.kv_lora_rank, c.qk_nope_dim, c.rope_dim, c.v_head_dim, c.indexer_heads, c.indexer_dim, c.indexer_top_k,
        c.layer_norm_eps, pattern(c.indexer_full), c.dense_ff, c.n_expert, c.expert_ff, c.n_expert_used,
        c.n_expert_shared, c.expert_weights_scale, types, tensors.size(), mib(bytes), gib(bytes));
}

uint64_t generate_glm(const GlmPlan& p, const std::string& out_path, std::FILE* log) {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    auto seconds = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };

    gguf::Writer w(out_path);
    p.cfg.write_metadata(w);
    w.set("general.quantization_version", gguf::Value::u32(2));
    write_glm4_tokenizer(w, p.cfg.n_vocab);
    const std::vector<TensorSpec> tensors = file_tensors(p);
    uint64_t max_bytes = 0;
    for (const TensorSpec& s : tensors) {
        w.add_tensor(s.name, p.type_of(s.cls), s.ne);
        max_bytes = std::max(max_bytes, bytes_of(s, p.type_of(s.cls)));
    }
    w.begin_data();
    Buffer buffer(p.sparse ? 0 : max_bytes);
    std::unique_ptr<ThreadPool> pool;
    if (!p.sparse && p.threads > 1) pool = std::make_unique<ThreadPool>(p.threads);
    int last_layer = -2;
    for (const TensorSpec& s : tensors) {
        if (p.sparse) {
            w.skip_tensor(s.name);
            continue;
        }
        if (log && s.layer != last_layer && s.layer >= 0) {
            std::fprintf(log, "  layer %d/%u  (%.1f s)\n", s.layer, p.cfg.n_layer, seconds());
            std::fflush(log);
        }
        last_layer = s.layer;
        const std::span<uint8_t> data = buffer.span(bytes_of(s, p.type_of(s.cls)));
        generate_tensor(s, p.type_of(s.cls), p.seed, p.exact_quant, pool.get(), data);
        w.write_tensor(s.name, data);
    }
    w.finish();
    const uint64_t size = std::filesystem::file_size(out_path);
    if (log)
        std::fprintf(log, "wrote %s: %s (%llu bytes) in %.1f s\n", out_path.c_str(), gib(size).c_str(),
                     (unsigned long long)size, seconds());
    return size;
}

}  // namespace ds4::gen
