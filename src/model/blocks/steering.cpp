#include "model/blocks/steering.h"

#include <algorithm>

#include "common/error.h"

namespace ds4::blocks {

void steer_row(float* F, const float* v, float s, int64_t D) {
    double d = 0.0;
    for (int64_t i = 0; i < D; ++i) d += double(v[i]) * double(F[i]);
    const float k = float(double(s) * d);
    for (int64_t i = 0; i < D; ++i) F[i] -= k * v[i];
}

OutputEdit::OutputEdit(const model::Steering* steering, const Rows& rows, model::Sublayer which, uint32_t layer,
                       int64_t D)
    : steering_(steering), rows_(rows), which_(which), layer_(layer), D_(D) {
    if (steering_ && steering_->edits(which)) {
        if (steering_->n_embd != D || layer >= steering_->n_layer)
            fail("internal: steering of {} x {} applied to layer {} of width {}", steering_->n_layer,
                 steering_->n_embd, layer, D);
        edits_ = true;
    }
    for (const Rows::Span& sp : rows.spans)
        if (const model::SublayerCapture* cap = sp.seq->sublayer_capture()) {
            // Checked here, not in apply(), which runs on the pool's threads.
            if (cap->n_embd != D || size_t(layer) >= cap->seen.size() ||
                cap->ffn.size() != cap->seen.size() * size_t(D) || cap->attn.size() != cap->ffn.size())
                fail("sublayer capture: sized for width {}, {} layers; the model writes layer {} of width {}",
                     cap->n_embd, cap->seen.size(), layer, D);
            captures_ = true;
        }
}

void OutputEdit::apply(int64_t t, float* F) const {
    if (edits_)
        for (const model::SteeringSlot& slot : steering_->slots) {
            const float s = steering_->scale(slot, which_);
            if (s != 0.0f) steer_row(F, steering_->direction(slot, layer_), s, D_);
        }
    if (!captures_) return;
    const Rows::Span& sp = rows_.span(t);
    model::SublayerCapture* cap = sp.seq->sublayer_capture();
    if (!cap || t != sp.row0 + sp.n - 1) return;
    std::vector<float>& out = which_ == model::Sublayer::Ffn ? cap->ffn : cap->attn;
    std::copy(F, F + D_, out.begin() + int64_t(layer_) * D_);
    if (which_ == model::Sublayer::Ffn) cap->seen[layer_] = 1;
}

}  // namespace ds4::blocks
