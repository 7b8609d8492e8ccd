#include "quantize/imatrix_collect.h"

#include <fmt/format.h>

#include "common/error.h"

namespace ds4::quantize {
namespace {

constexpr const char* kMarker = "===== DS4_IMATRIX_PROMPT";

std::string trimmed(const std::string& s, size_t b, size_t e) {
    auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
    while (b < e && space(s[b])) ++b;
    while (e > b && space(s[e - 1])) --e;
    return s.substr(b, e - b);
}

void add_squares(float* acc, const float* x, int64_t n, float w = 1.0f) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = w * x[i];
        acc[i] += v * v;
    }
}

// Means of the E blocks of `cols` sums: count[e] below min_samples gives 1s.
std::vector<float> means(const std::vector<float>& sums, const std::vector<int64_t>& count, int64_t cols,
                         int64_t min_samples) {
    std::vector<float> out(sums.size(), 1.0f);
    for (size_t e = 0; e < count.size(); ++e) {
        if (count[e] == 0 || count[e] < min_samples) continue;
        const float inv = 1.0f / float(count[e]);
        for (int64_t i = 0; i < cols; ++i) out[e * size_t(cols) + size_t(i)] = sums[e * size_t(cols) + size_t(i)] * inv;
    }
    return out;
}

}  // namespace

std::vector<std::string> imatrix_prompts(const std::string& text) {
    std::vector<std::string> out;
    auto keep = [&](size_t b, size_t e) {
        std::string p = trimmed(text, b, e);
        if (!p.empty()) out.push_back(std::move(p));
    };
    size_t m = text.find(kMarker);
    if (m == std::string::npos) {
        keep(0, text.size());
        return out;
    }
    while (m != std::string::npos) {
        const size_t nl = text.find('\n', m);
        if (nl == std::string::npos) break;  // a marker line with nothing after it
        const size_t next = text.find(kMarker, nl + 1);
        keep(nl + 1, next == std::string::npos ? text.size() : next);
        m = next;
    }
    return out;
}

ImatrixCollector::Layer& ImatrixCollector::layer(uint32_t il) {
    if (il >= layers_.size()) layers_.resize(size_t(il) + 1);
    return layers_[il];
}

void ImatrixCollector::add_routed(uint32_t il, int64_t n_expert, int32_t expert, const float* x, int64_t n_embd,
                                  const float* h, int64_t ff, float w) {
    Layer& L = layer(il);
    if (L.n_expert == 0) {
        if (n_expert <= 0 || n_embd <= 0 || ff <= 0)
            fail("imatrix: layer {}: {} experts of {} x {}", il, n_expert, n_embd, ff);
        L.n_expert = n_expert, L.n_embd = n_embd, L.ff = ff;
        L.gate_up.assign(size_t(n_expert * n_embd), 0.0f);
        L.down.assign(size_t(n_expert * ff), 0.0f);
        L.count.assign(size_t(n_expert), 0);
    } else if (L.n_expert != n_expert || L.n_embd != n_embd || L.ff != ff) {
        fail("imatrix: layer {} observed as {} experts of {} x {}, then {} of {} x {}", il, L.n_expert, L.n_embd,
             L.ff, n_expert, n_embd, ff);
    }
    if (expert < 0 || expert >= n_expert) fail("imatrix: layer {}: expert {} of {}", il, expert, n_expert);
    add_squares(&L.gate_up[size_t(expert) * size_t(n_embd)], x, n_embd);
    add_squares(&L.down[size_t(expert) * size_t(ff)], h, ff, w);
    ++L.count[size_t(expert)];
    ++routes_;
}

void ImatrixCollector::add_shared(uint32_t il, const float* x, int64_t n_embd, const float* h, int64_t ff) {
    Layer& L = layer(il);
    if (L.shared_count == 0 && L.shared_in.empty()) {
        L.ff_shared = ff;
        L.shared_in.assign(size_t(n_embd), 0.0f);
        L.shared_down.assign(size_t(ff), 0.0f);
    } else if (int64_t(L.shared_in.size()) != n_embd || L.ff_shared != ff) {
        fail("imatrix: layer {}: shared expert observed as {} x {}, then {} x {}", il, L.shared_in.size(),
             L.ff_shared, n_embd, ff);
    }
    add_squares(L.shared_in.data(), x, n_embd);
    add_squares(L.shared_down.data(), h, ff);
    ++L.shared_count;
}

int64_t ImatrixCollector::count(uint32_t il, int32_t expert) const {
    const Layer* L = find(il);
    return L && expert >= 0 && expert < L->n_expert ? L->count[size_t(expert)] : 0;
}

const float* ImatrixCollector::gate_up_sums(uint32_t il, int32_t expert) const {
    const Layer* L = find(il);
    return L && expert >= 0 && expert < L->n_expert ? &L->gate_up[size_t(expert) * size_t(L->n_embd)] : nullptr;
}

const float* ImatrixCollector::down_sums(uint32_t il, int32_t expert) const {
    const Layer* L = find(il);
    return L && expert >= 0 && expert < L->n_expert ? &L->down[size_t(expert) * size_t(L->ff)] : nullptr;
}

Imatrix ImatrixCollector::imatrix(const std::string& dataset, int chunks) const {
    Imatrix m;
    m.datasets.push_back(dataset);
    m.chunks = chunks;
    for (uint32_t il = 0; il < layers_.size(); ++il) {
        const Layer& L = layers_[il];
        const std::string blk = fmt::format("blk.{}.", il);
        if (L.n_expert > 0) {
            std::vector<float> in = means(L.gate_up, L.count, L.n_embd, min_samples_);
            m.entries[blk + "ffn_gate_exps.weight"] = in;
            m.entries[blk + "ffn_up_exps.weight"] = std::move(in);
            m.entries[blk + "ffn_down_exps.weight"] = means(L.down, L.count, L.ff, min_samples_);
        }
        if (L.shared_count > 0) {
            const std::vector<int64_t> one{L.shared_count};
            std::vector<float> in = means(L.shared_in, one, int64_t(L.shared_in.size()), 1);
            m.entries[blk + "ffn_gate_shexp.weight"] = in;
            m.entries[blk + "ffn_up_shexp.weight"] = std::move(in);
            m.entries[blk + "ffn_down_shexp.weight"] = means(L.shared_down, one, L.ff_shared, 1);
        }
    }
    return m;
}

}  // namespace ds4::quantize
