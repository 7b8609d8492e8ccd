#include "model/steering.h"

#include <cmath>

#include "common/error.h"
#include "model/model.h"

namespace ds4::model {

bool Steering::edits(Sublayer which) const {
    for (const SteeringSlot& s : slots)
        if (scale(s, which) != 0.0f) return true;
    return false;
}

void check_directions(const std::vector<float>& dirs, uint32_t n_layer, int64_t n_embd, const std::string& source) {
    const size_t want = size_t(n_layer) * size_t(n_embd);
    if (n_layer == 0 || n_embd <= 0) fail("{}: the model has no steering width", source);
    if (dirs.size() != want)
        fail("{}: {} floats ({} bytes), but this model needs {} layers x {} = {} floats ({} bytes)", source,
             dirs.size(), dirs.size() * 4, n_layer, n_embd, want, want * 4);
    for (uint32_t il = 0; il < n_layer; ++il) {
        double n2 = 0.0;
        for (int64_t i = 0; i < n_embd; ++i) {
            const float x = dirs[size_t(il) * size_t(n_embd) + size_t(i)];
            if (!std::isfinite(x)) fail("{}: layer {} value {} is not finite ({})", source, il, i, x);
            n2 += double(x) * double(x);
        }
        // A unit direction, or a layer the file leaves alone (all zero).
        if (n2 != 0.0 && std::abs(std::sqrt(n2) - 1.0) > 1e-3)
            fail("{}: layer {}'s direction has length {:.6f}, not 1 (directions must be normalised)", source, il,
                 std::sqrt(n2));
    }
}

void Model::set_steering(std::shared_ptr<const Steering> s) {
    if (s) {
        if (s->n_layer != info().n_layer || s->n_embd != info().n_embd)
            fail("steering: directions of {} layers x {} do not fit this model ({} x {})", s->n_layer, s->n_embd,
                 info().n_layer, info().n_embd);
        for (const SteeringSlot& slot : s->slots) check_directions(slot.directions, s->n_layer, s->n_embd, slot.source);
        if (s->slots.empty()) s = nullptr;
    }
    std::lock_guard lock(steering_mu_);
    steering_ = std::move(s);
}

}  // namespace ds4::model
