// Writing the model: metadata, tensor directory, then one tensor at a time (generated,
// converted, written, freed), so memory holds at most the largest tensor.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <span>

#include "common/error.h"
#include "common/thread_pool.h"
#include "gguf/writer.h"
#include "mtp.h"
#include "options.h"
#include "scratch.h"
#include "vocab.h"
#include "weights.h"

namespace ds4::gen {

namespace {

std::string gib(uint64_t bytes) { return fmt::format("{:.2f} GiB", double(bytes) / (1ull << 30)); }
std::string mib(uint64_t bytes) { return fmt::format("{:.1f} MiB", double(bytes) / (1ull << 20)); }

// The main file's tensors: the trunk's, then an embedded MTP head's.
std::vector<GenTensor> main_tensors(const GenPlan& p) {
    std::vector<GenTensor> out = plain_tensors(deepseek4::tensor_layout(p.cfg));
    if (p.mtp_embedded)
        for (GenTensor& t : mtp_embedded_tensors(p.cfg)) out.push_back(std::move(t));
    return out;
}

uint64_t data_bytes(const GenPlan& p, const std::vector<GenTensor>& tensors) {
    uint64_t n = 0;
    for (const auto& t : tensors) n += tensor_bytes(t.spec, p.types.of(t.spec.cls));
    return n;
}

}  // namespace

std::string describe(const GenPlan& p) {
    const deepseek4::ModelConfig& c = p.cfg;
    std::string ratios;
    for (uint32_t i = 0; i < c.n_layer; ++i) {
        if (i) ratios += ',';
        ratios += std::to_string(c.compress_ratios[i]);
    }
    std::string types;
    for (int i = 0; i < deepseek4::kTensorClassCount; ++i) {
        const auto cls = deepseek4::TensorClass(i);
        types += fmt::format("{}{}={}", i ? " " : "", deepseek4::tensor_class_name(cls),
                             tensor_type_name(p.types.of(cls)));
    }
    const auto tensors = main_tensors(p);
    const uint64_t bytes = data_bytes(p, tensors);
    std::string mtp;
    if (p.mtp_embedded) mtp += fmt::format("\n  MTP head embedded as blk.{} (nextn_predict_layers 1)", c.n_layer);
    if (!p.mtp_out.empty())
        mtp += fmt::format("\n  MTP support file {}: {} of tensor data", p.mtp_out,
                           mib(data_bytes(p, mtp_support_tensors(c))));
    return fmt::format(
        "preset {} seed {}{}{}\n"
        "  layers {} (ratios {}; hash layers {}), n_embd {}, vocab {}\n"
        "  attention: {} heads x {} (rope {}), q_rank {}, o_rank {} x {} groups, window {}\n"
        "  indexer: {} heads x {}, top-k {}; hc {} (sinkhorn {})\n"
        "  moe: {} experts x ff {}, {} used, {} shared\n"
        "  types: {}\n"
        "  {} tensors, {} of tensor data ({}){}",
        p.preset, p.seed, p.real_vocab ? ", real vocabulary" : "", p.sparse ? ", sparse" : "",
        c.n_layer, ratios, c.n_hash_layers, c.n_embd, c.n_vocab, c.n_head, c.head_dim, c.rope_dim,
        c.q_lora_rank, c.o_lora_rank, c.o_groups, c.window, c.indexer_heads, c.indexer_dim,
        c.indexer_top_k, c.hc, c.sinkhorn_iters, c.n_expert, c.expert_ff, c.n_expert_used,
        c.n_expert_shared, types, tensors.size(), mib(bytes), gib(bytes), mtp);
}

namespace {

// Declares `tensors`, then generates and writes them one at a time.
void write_tensors(gguf::Writer& w, const std::vector<GenTensor>& tensors, const GenPlan& p, std::FILE* log,
                   const std::function<double()>& seconds) {
    for (const auto& t : tensors) w.add_tensor(t.spec.name, p.types.of(t.spec.cls), t.spec.ne);
    w.begin_data();

    // One buffer, sized for the largest tensor and reused (scratch.h).
    uint64_t max_bytes = 0;
    for (const auto& t : tensors) max_bytes = std::max(max_bytes, tensor_bytes(t.spec, p.types.of(t.spec.cls)));
    Buffer buffer(p.sparse ? 0 : max_bytes);

    std::unique_ptr<ThreadPool> pool;
    if ((!p.sparse || p.fill.any()) && p.threads > 1) pool = std::make_unique<ThreadPool>(p.threads);
    int last_layer = -2;
    for (const auto& t : tensors) {
        const auto& s = t.spec;
        if (log && s.layer != last_layer && s.layer >= 0 && !p.sparse) {
            std::fprintf(log, "  layer %d/%u  (%.1f s)\n", s.layer, p.cfg.n_layer, seconds());
            std::fflush(log);
        }
        last_layer = s.layer;
        if (p.sparse) {
            if (!write_filled(w, t, p, pool.get())) w.skip_tensor(s.name);
            continue;
        }
        const std::span<uint8_t> data = buffer.span(tensor_bytes(s, p.types.of(s.cls)));
        generate_gen_tensor(t, p.types.of(s.cls), p.cfg, p.seed, p.exact_quant, pool.get(), data);
        w.write_tensor(s.name, data);
    }
    w.finish();
}

}  // namespace

uint64_t generate(const GenPlan& p, const std::string& out_path, std::FILE* log) {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    const std::function<double()> seconds = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };

    std::unique_ptr<Vocab> vocab;
    if (p.real_vocab) {
        if (p.tokenizer_json.empty())
            fail("--real-vocab: no tokenizer.json found; pass --tokenizer-json PATH or set "
                 "DS4_TOKENIZER_JSON (scripts/setup.sh installs it under "
                 ".cache/oracle/tokenizer/models/)");
        vocab = std::make_unique<Vocab>(load_deepseek_vocab(p.tokenizer_json, p.cfg.n_vocab));
    }

    gguf::Writer w(out_path);
    p.cfg.write_metadata(w);
    w.set("general.quantization_version", gguf::Value::u32(2));
    write_tokenizer_metadata(w, vocab.get());
    vocab.reset();
    write_tensors(w, main_tensors(p), p, log, seconds);
    const uint64_t size = std::filesystem::file_size(out_path);
    if (log)
        std::fprintf(log, "wrote %s: %s (%llu bytes) in %.1f s\n", out_path.c_str(),
                     gib(size).c_str(), (unsigned long long)size, seconds());

    if (!p.mtp_out.empty()) {
        gguf::Writer m(p.mtp_out);
        write_mtp_support_metadata(m, p.cfg);
        write_tensors(m, mtp_support_tensors(p.cfg), p, log, seconds);
        if (log)
            std::fprintf(log, "wrote %s (MTP support): %s in %.1f s\n", p.mtp_out.c_str(),
                         mib(std::filesystem::file_size(p.mtp_out)).c_str(), seconds());
    }
    return size;
}

}  // namespace ds4::gen
