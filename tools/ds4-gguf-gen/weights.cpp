#include "weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <string_view>

#include "common/error.h"
#include "common/thread_pool.h"
#include "quant/quant.h"
#include "random_blocks.h"
#include "rng.h"
#include "scratch.h"

namespace ds4::gen {

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

Init init_for(const deepseek4::TensorSpec& spec) {
    const std::string_view n = spec.name;
    if (spec.cls == deepseek4::TensorClass::Tid2Eid) return Init::Tid2Eid;
    // DSpark's markov_w1 is a table of one R-vector per token, read like an embedding row.
    if (n == "token_embd.weight" || ends_with(n, "markov_w1.weight")) return Init::Embedding;
    if (ends_with(n, "_scale.weight")) return Init::HcScale;  // hc_attn/hc_ffn/output_hc scale
    if (ends_with(n, "_base.weight")) return Init::HcBase;
    if (ends_with(n, "attn_sinks.weight")) return Init::Sinks;
    if (ends_with(n, "exp_probs_b.bias")) return Init::ProbsBias;
    if (ends_with(n, "_ape.weight")) return Init::Ape;
    if (ends_with(n, "norm.weight")) return Init::NormWeight;
    if (spec.cls == deepseek4::TensorClass::Norm)
        fail("generator: no initialisation rule for F32 tensor {}", spec.name);
    return Init::Linear;  // every matrix, hc_*_fn included
}

void generate_row(const deepseek4::TensorSpec& spec, Init init, uint64_t seed, int64_t row,
                  float* out) {
    Rng rng(seed, fnv1a64(spec.name), uint64_t(row));
    const int64_t n = spec.ne[0];
    float mean = 0.0f, std = 1.0f;
    switch (init) {
        case Init::Linear: std = float(1.0 / std::sqrt(double(n))); break;
        case Init::Embedding: break;
        case Init::NormWeight: mean = 1.0f, std = 0.1f; break;
        case Init::HcScale: mean = 1.0f, std = 0.2f; break;
        case Init::HcBase: std = 0.5f; break;
        case Init::Sinks: break;
        case Init::ProbsBias: std = 0.1f; break;
        case Init::Ape: std = 0.1f; break;
        case Init::Tid2Eid: fail("generator: tid2eid is not float-valued");
    }
    for (int64_t i = 0; i < n; ++i) out[i] = mean + std * rng.normal();
}

namespace {

// Row `row` of tid2eid: n_expert_used distinct expert ids (rejection sampling; K << E).
void tid2eid_row(const deepseek4::TensorSpec& spec, uint32_t n_expert, uint64_t seed, int64_t row,
                 int32_t* out) {
    Rng rng(seed, fnv1a64(spec.name), uint64_t(row));
    const int64_t k = spec.ne[0];
    for (int64_t i = 0; i < k; ++i) {
        for (;;) {
            const int32_t id = int32_t(rng.below(n_expert));
            bool dup = false;
            for (int64_t j = 0; j < i && !dup; ++j) dup = out[j] == id;
            if (!dup) {
                out[i] = id;
                break;
            }
        }
    }
}

}  // namespace

void for_rows(ThreadPool* pool, int64_t rows, int64_t grain,
              const std::function<void(int64_t, int64_t)>& fn) {
    if (!pool) return fn(0, rows);
    std::mutex mu;
    std::exception_ptr first;
    pool->parallel_for(
        rows,
        [&](int64_t b, int64_t e) {
            try {
                fn(b, e);
            } catch (...) {
                std::lock_guard<std::mutex> lock(mu);
                if (!first) first = std::current_exception();
            }
        },
        grain);
    if (first) std::rethrow_exception(first);
}

uint64_t tensor_bytes(const deepseek4::TensorSpec& spec, TensorType type) {
    return row_bytes(type, spec.ne[0]) * uint64_t(spec.n_elements() / spec.ne[0]);
}

void generate_tensor(const deepseek4::TensorSpec& spec, TensorType type, const deepseek4::ModelConfig& cfg,
                     uint64_t seed, bool exact_quant, ThreadPool* pool, std::span<uint8_t> data) {
    const Init init = init_for(spec);
    const int64_t n = spec.ne[0];
    const int64_t rows = spec.n_elements() / n;
    const size_t rb = row_bytes(type, n);
    if (data.size() != rb * size_t(rows))
        fail("generator: buffer of {} bytes for tensor {} of {} bytes", data.size(), spec.name,
             rb * size_t(rows));

    if (init == Init::Tid2Eid) {
        if (type != TensorType::I32) fail("generator: {} must be i32", spec.name);
        for_rows(pool, rows, 4096, [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r)
                tid2eid_row(spec, cfg.n_expert, seed, r,
                            reinterpret_cast<int32_t*>(data.data() + size_t(r) * rb));
        });
        return;
    }
    if (!quant::is_weight_format(type))
        fail("generator: {} cannot be stored as {}", spec.name, tensor_type_name(type));
    // ~64 Ki values per task keeps the threads balanced without scheduling overhead.
    const int64_t grain = std::max<int64_t>(1, 65536 / n);
    if (!exact_quant && has_random_blocks(type) && (init == Init::Linear || init == Init::Embedding)) {
        const float rms = init == Init::Embedding ? 1.0f : float(1.0 / std::sqrt(double(n)));
        for_rows(pool, rows, grain, [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
                Rng rng(seed, fnv1a64(spec.name), uint64_t(r));
                random_blocks_row(type, rng, n, rms, data.data() + size_t(r) * rb);
            }
        });
        return;
    }
    for_rows(pool, rows, grain, [&](int64_t b, int64_t e) {
        std::vector<float> buf(static_cast<size_t>(n));
        for (int64_t r = b; r < e; ++r) {
            generate_row(spec, init, seed, r, buf.data());
            quant::quantize_row(type, buf.data(), data.data() + size_t(r) * rb, n);  // plain squared error
        }
    });
}

}  // namespace ds4::gen
