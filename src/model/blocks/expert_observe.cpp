#include "model/blocks/expert_observe.h"

#include <vector>

namespace ds4::blocks {

void observe_experts(const Rows& rows, uint32_t layer, int64_t n_expert, const float* v,
                     std::span<const Route> routes, const ExpertOutputs& out) {
    const int64_t K = out.n_used, D = out.width;
    for (const Rows::Span& sp : rows.spans) {
        model::ExpertObserver* obs = sp.seq->expert_observer();
        if (!obs) continue;
        // Slot t*K+k is row t's k-th expert, so a span's slots are contiguous; its routes are
        // flattened into the observer's arrays.
        std::vector<int32_t> chosen(static_cast<size_t>(sp.n * K));
        std::vector<float> weight(chosen.size());
        for (int64_t t = 0; t < sp.n; ++t)
            for (int64_t k = 0; k < K; ++k) {
                const Route& r = routes[size_t(sp.row0 + t)];
                chosen[size_t(t * K + k)] = r.chosen[size_t(k)];
                weight[size_t(t * K + k)] = r.weight[size_t(k)];
            }
        obs->observe({.layer = layer,
                      .n = sp.n,
                      .n_embd = D,
                      .ff = out.ff,
                      .n_used = K,
                      .n_expert = n_expert,
                      .ff_shared = out.shared_hidden ? out.ff_shared : 0,
                      .input = v + sp.row0 * D,
                      .chosen = chosen.data(),
                      .weight = weight.data(),
                      .hidden = out.hidden + sp.row0 * K * out.ff,
                      .shared_hidden = out.shared_hidden ? out.shared_hidden + sp.row0 * out.ff_shared : nullptr});
    }
}

}  // namespace ds4::blocks
