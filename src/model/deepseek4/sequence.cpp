#include "model/deepseek4/sequence.h"

#include <algorithm>

#include "common/error.h"
#include "model/context_check.h"
#include "model/deepseek4/model.h"

namespace ds4::deepseek4 {

LayerState::LayerState(const ModelConfig& c, const LayerWeights& w, int64_t ctx,
                                int64_t slack)
    : ratio(w.ratio), window(c.window), head_dim(c.head_dim), indexer_dim(c.indexer_dim) {
    // Slots beyond the context are never used: a ring as long as the context never wraps.
    raw_slots = std::min<int64_t>(window + slack, std::max<int64_t>(1, ctx));
    raw.assign(size_t(raw_slots * head_dim), 0.0f);
    // The compressed caches are sized for the whole context but their pages are touched only
    // as rows are written (UntouchedVector): a long context reserves address space, and memory
    // grows with the positions used.
    if (ratio != 0) {
        comp.resize(size_t((ctx / ratio + 1) * head_dim));
        compressor.init(w.compressor, std::min(slack, ctx));
    }
    if (ratio == 4) {
        index_comp.resize(size_t((ctx / 4 + 1) * c.indexer_dim));
        index_compressor.init(w.indexer_compressor, std::min(slack, ctx));
    }
}

int64_t LayerState::bytes_for(const ModelConfig& c, uint32_t ratio, int64_t ctx, int64_t slack) {
    const int64_t raw_slots = std::min<int64_t>(c.window + slack, std::max<int64_t>(1, ctx));
    int64_t b = int64_t(sizeof(float)) * raw_slots * c.head_dim;
    if (ratio != 0) {
        b += int64_t(sizeof(float)) * (ctx / ratio + 1) * c.head_dim;
        b += CompressorState::bytes_for(int(ratio), int(c.head_dim), std::min(slack, ctx));
    }
    if (ratio == 4) {
        b += int64_t(sizeof(float)) * (ctx / 4 + 1) * c.indexer_dim;
        b += CompressorState::bytes_for(4, int(c.indexer_dim), std::min(slack, ctx));
    }
    return b;
}

// Copies only the compressed rows in use (the rest of the reservation stays untouched).
LayerState::LayerState(const LayerState& o) { *this = o; }

LayerState& LayerState::operator=(const LayerState& o) {
    if (this == &o) return *this;
    ratio = o.ratio;
    window = o.window;
    head_dim = o.head_dim;
    indexer_dim = o.indexer_dim;
    raw_slots = o.raw_slots;
    raw_valid_from = o.raw_valid_from;
    raw = o.raw;
    n_comp = o.n_comp;
    n_index_comp = o.n_index_comp;
    auto copy_rows = [](UntouchedVector<float>& dst, const UntouchedVector<float>& src, size_t used) {
        if (dst.size() != src.size()) {
            dst = UntouchedVector<float>();
            dst.resize(src.size());
        }
        std::copy(src.begin(), src.begin() + ptrdiff_t(used), dst.begin());
    };
    copy_rows(comp, o.comp, size_t(n_comp * head_dim));
    copy_rows(index_comp, o.index_comp, size_t(n_index_comp * indexer_dim));
    compressor = o.compressor;
    index_compressor = o.index_compressor;
    return *this;
}

void LayerState::reset() {
    n_comp = n_index_comp = 0;
    raw_valid_from = 0;
    if (ratio != 0) compressor.reset();
    if (ratio == 4) index_compressor.reset();
}

bool LayerState::can_rewind(int64_t n, int64_t pos) const {
    if (n < 0 || n > pos) return false;
    // Raw rows n-window .. n-1 must not have been overwritten by positions up to pos-1.
    if (n > 0 && std::max<int64_t>(0, n - window) < std::max(pos - raw_slots, raw_valid_from)) return false;
    if (ratio != 0 && !compressor.can_rewind(n)) return false;
    if (ratio == 4 && !index_compressor.can_rewind(n)) return false;
    return true;
}

int64_t LayerState::bytes() const {
    int64_t b = int64_t(sizeof(float) * (raw.size() + comp.size() + index_comp.size()));
    if (ratio != 0) b += compressor.bytes();
    if (ratio == 4) b += index_compressor.bytes();
    return b;
}

int64_t LayerState::used_bytes(int64_t pos) const {
    int64_t b = int64_t(sizeof(float)) *
                (std::min(pos, window) * head_dim + n_comp * head_dim + n_index_comp * indexer_dim);
    if (ratio != 0) b += compressor.used_bytes();
    if (ratio == 4) b += index_compressor.used_bytes();
    return b;
}

void LayerState::rewind(int64_t n) {
    if (ratio == 0) return;
    compressor.rewind(n);
    n_comp = n / ratio;  // row i is complete once position (i+1)*ratio - 1 is fed
    if (ratio == 4) {
        index_compressor.rewind(n);
        n_index_comp = n / 4;
    }
}

Sequence::Sequence(const Model& model, model::SequenceOptions opt)
    : model::Sequence(opt), model_(&model), first_(model.info().range.first) {
    if (opt_.ctx <= 0) fail("context size {} must be positive", opt_.ctx);
    if (opt_.ctx > kMaxContext) fail("context size {} is above the engine's limit of {}", opt_.ctx, kMaxContext);
    // Before anything is reserved: a context whose state cannot fit is an error saying what fits.
    model::check_memory(model, opt_);
    if (opt_.rewind_slack < 0) opt_.rewind_slack = 0;
    const ModelConfig& c = model.config();
    const model::LayerRange& r = model.info().range;
    layers_.reserve(r.count());
    for (uint32_t il = r.first; il <= r.last; ++il)
        layers_.emplace_back(c, model.weights().layers[il], opt_.ctx, opt_.rewind_slack);
}

bool Sequence::can_rewind(int64_t n) const {
    if (n < 0 || n > pos()) return false;
    for (const auto& l : layers_)
        if (!l.can_rewind(n, pos())) return false;
    return true;
}

void Sequence::rewind(int64_t n) {
    if (!can_rewind(n)) fail("cannot rewind a sequence of {} positions to {} without evaluating again", pos(), n);
    for (auto& l : layers_) l.rewind(n);
    tokens_.resize(size_t(n));
}

void Sequence::clear() {
    for (auto& l : layers_) l.reset();
    tokens_.clear();
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

std::unique_ptr<model::Sequence> Sequence::clone() const {
    return std::unique_ptr<model::Sequence>(new Sequence(*this));
}

void Sequence::assign(const model::Sequence& other) {
    const auto* o = dynamic_cast<const Sequence*>(&other);
    if (!o || o->model_ != model_ || o->layers_.size() != layers_.size() ||
        o->opt_.ctx != opt_.ctx || o->opt_.rewind_slack != opt_.rewind_slack)
        fail("restore: the snapshot belongs to a sequence of another model or with other options");
    layers_ = o->layers_;
    tokens_ = o->tokens_;
    opt_.qat = o->opt_.qat;
}

}  // namespace ds4::deepseek4
