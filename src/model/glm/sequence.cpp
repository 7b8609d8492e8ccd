#include "model/glm/sequence.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "model/context_check.h"
#include "model/glm/model.h"

namespace ds4::glm {

LayerState::LayerState(const GlmConfig& c, uint32_t il, int64_t ctx)
    : key_dim(c.key_dim()), index_dim(c.indexer_is_full(il) ? c.indexer_dim : 0) {
    kv.resize(size_t(ctx * key_dim));
    index.resize(size_t(ctx * index_dim));
}

LayerState::LayerState(int64_t key_dim_, int64_t index_dim_, int64_t ctx) : key_dim(key_dim_), index_dim(index_dim_) {
    kv.resize(size_t(ctx * key_dim));
    index.resize(size_t(ctx * index_dim));
}

int64_t LayerState::bytes_for(const GlmConfig& c, uint32_t il, int64_t ctx) {
    const int64_t per = int64_t(c.key_dim()) + (c.indexer_is_full(il) ? int64_t(c.indexer_dim) : 0);
    return ctx * per * int64_t(sizeof(float));
}

int64_t LayerState::bytes() const { return int64_t((kv.size() + index.size()) * sizeof(float)); }

int64_t LayerState::used_bytes(int64_t pos) const { return pos * (key_dim + index_dim) * int64_t(sizeof(float)); }

void write_layer_section(model::StateWriter& w, const LayerState& L, int64_t pos) {
    w.u32(uint32_t(L.key_dim));
    w.u32(uint32_t(L.index_dim));
    w.floats(L.kv.data(), size_t(pos * L.key_dim));
    w.floats(L.index.data(), size_t(pos * L.index_dim));
}

void read_layer_section(model::StateReader& r, uint32_t il, int64_t pos, LayerState& L) {
    const uint32_t key_dim = r.u32("key width"), index_dim = r.u32("indexer width");
    if (key_dim != uint32_t(L.key_dim) || index_dim != uint32_t(L.index_dim))
        r.bad(fmt::format("layer {}: rows of {} and {} values, expected {} and {}", il, key_dim, index_dim, L.key_dim,
                          L.index_dim));
    const std::vector<float> kv = r.floats(uint64_t(pos) * key_dim, "latent rows");
    std::copy(kv.begin(), kv.end(), L.kv.begin());
    const std::vector<float> index = r.floats(uint64_t(pos) * index_dim, "indexer rows");
    std::copy(index.begin(), index.end(), L.index.begin());
}

Sequence::Sequence(const Model& model, model::SequenceOptions opt)
    : model::Sequence(opt), model_(&model), first_(model.info().range.first) {
    if (opt_.ctx <= 0) fail("context size {} must be positive", opt_.ctx);
    if (opt_.ctx > kMaxContext) fail("context size {} is above the engine's limit of {}", opt_.ctx, kMaxContext);
    model::check_memory(model, opt_);
    if (opt_.rewind_slack < 0) opt_.rewind_slack = 0;
    const model::LayerRange& r = model.info().range;
    layers_.reserve(r.count());
    for (uint32_t il = r.first; il <= r.last; ++il) layers_.emplace_back(model.config(), il, opt_.ctx);
}

void Sequence::rewind(int64_t n) {
    if (!can_rewind(n)) fail("cannot rewind a sequence of {} positions to {}", pos(), n);
    tokens_.resize(size_t(n));  // the rows past n are overwritten when positions are fed again
}

int64_t Sequence::state_bytes() const {
    int64_t b = 0;
    for (const auto& l : layers_) b += l.bytes();
    return b;
}

int64_t Sequence::state_bytes_used() const {
    int64_t b = 0;
    for (const auto& l : layers_) b += l.used_bytes(pos());
    return b;
}

std::unique_ptr<model::Sequence> Sequence::clone() const { return std::unique_ptr<model::Sequence>(new Sequence(*this)); }

void Sequence::assign(const model::Sequence& other) {
    const auto* o = dynamic_cast<const Sequence*>(&other);
    if (!o || o->model_ != model_ || o->layers_.size() != layers_.size() || o->opt_.ctx != opt_.ctx)
        fail("restore: the snapshot belongs to a sequence of another model or with other options");
    // Only the rows the snapshot holds (the rest is never read before it is written).
    const int64_t n = o->pos();
    for (size_t i = 0; i < layers_.size(); ++i) {
        LayerState& d = layers_[i];
        const LayerState& s = o->layers_[i];
        std::memcpy(d.kv.data(), s.kv.data(), sizeof(float) * size_t(n * d.key_dim));
        std::memcpy(d.index.data(), s.index.data(), sizeof(float) * size_t(n * d.index_dim));
    }
    tokens_ = o->tokens_;
    opt_.qat = o->opt_.qat;
}

}  // namespace ds4::glm
