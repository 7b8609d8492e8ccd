#include "model/identity.h"

#include <xxhash.h>

#include <cstring>
#include <memory>

#include "model/file_hashes.h"

namespace ds4::model {

std::array<uint8_t, 16> identity(const Model& m) {
    std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> st(XXH3_createState(), &XXH3_freeState);
    if (!st) throw std::bad_alloc();
    XXH3_128bits_reset(st.get());
    const auto& meta = m.info().metadata_hash;
    XXH3_128bits_update(st.get(), meta.data(), meta.size());
    for (const gguf::TensorInfo& t : m.file().tensors()) {
        // Length-prefixed name, then type and the four dims: no two layouts share a byte string.
        const uint64_t len = t.name.size();
        XXH3_128bits_update(st.get(), &len, sizeof len);
        XXH3_128bits_update(st.get(), t.name.data(), t.name.size());
        const uint32_t type = uint32_t(t.type);
        XXH3_128bits_update(st.get(), &type, sizeof type);
        XXH3_128bits_update(st.get(), &t.n_dims, sizeof t.n_dims);
        XXH3_128bits_update(st.get(), t.ne.data(), sizeof t.ne);
    }
    // Directional steering changes every state computed under it: a steered model is another
    // model to the caches (scales of 0 change nothing, and leave the identity alone).
    if (const std::shared_ptr<const Steering> s = m.steering();
        s && (s->edits(Sublayer::Ffn) || s->edits(Sublayer::Attention))) {
        XXH3_128bits_update(st.get(), "steering", 8);
        for (const SteeringSlot& slot : s->slots) {
            const float scales[2] = {slot.ffn, slot.attn};
            XXH3_128bits_update(st.get(), scales, sizeof scales);
            XXH3_128bits_update(st.get(), slot.directions.data(), slot.directions.size() * sizeof(float));
        }
    }
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st.get()));
    std::array<uint8_t, 16> out;
    std::memcpy(out.data(), c.digest, 16);
    return out;
}

std::array<uint8_t, 16> weights_identity(const Model& m) {
    std::array<uint8_t, 32> both;
    const auto id = identity(m);
    const auto w = weights_hash(m.file());
    std::memcpy(both.data(), id.data(), 16);
    std::memcpy(both.data() + 16, w.data(), 16);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(both.data(), both.size()));
    std::array<uint8_t, 16> out;
    std::memcpy(out.data(), c.digest, 16);
    return out;
}

}  // namespace ds4::model
