// The forward pass (ARCHITECTURE.md §3, §3.7): embedding and HC expansion, then per layer the
// attention sublayer (attention.cpp) and the MoE sublayer (moe.cpp), then the HC output head.
// A chunk of tokens moves through each layer together: matrix products run over the whole
// chunk, while the per-token state updates (raw window, compressors, indexer) run in position
// order so every token sees exactly what token-by-token decoding would show it (§4.3).
#include "model/model.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "model/layer.h"
#include "model/layout.h"
#include "ops/hc.h"
#include "ops/norm.h"
#include "quant/quant.h"

namespace ds4::model {

std::unique_ptr<Model> Model::load(const std::string& path, gguf::File::Load how) {
    auto m = std::unique_ptr<Model>(new Model());
    m->file_ = gguf::File::open(path, how);
    m->cfg_ = ModelConfig::from_gguf(*m->file_);
    validate_tensors(*m->file_, m->cfg_);
    m->w_ = Weights::bind(*m->file_, m->cfg_);
    const ModelConfig& c = m->cfg_;
    ops::RopeParams plain{int(c.rope_dim), c.rope_base, false};
    ops::RopeParams compressed{int(c.rope_dim),        c.compress_rope_base, true,
                               c.yarn_factor,          float(c.yarn_orig_ctx),
                               c.yarn_beta_fast,       c.yarn_beta_slow};
    m->rope_plain_ = std::make_unique<ops::Rope>(plain);
    m->rope_compressed_ = std::make_unique<ops::Rope>(compressed);
    return m;
}

const ops::Rope& Model::rope(uint32_t il) const {
    return cfg_.compress_ratio(il) == 0 ? *rope_plain_ : *rope_compressed_;
}

Session::Session(const Model& model, SessionOptions opt)
    : model_(model), opt_(opt), pool_(opt.threads) {
    if (opt_.ctx <= 0) fail("context size {} must be positive", opt_.ctx);
    if (opt_.prefill_chunk <= 0) fail("prefill chunk {} must be positive", opt_.prefill_chunk);
    const ModelConfig& c = model.config();
    for (uint32_t il = 0; il < c.n_layer; ++il)
        layers_.push_back(std::make_unique<LayerState>(c, model.weights().layers[il], opt_.ctx,
                                                       std::max<int64_t>(0, opt_.rewind_slack)));
}

Session::~Session() = default;

class Session::Snapshot {
public:
    const Model* model = nullptr;
    std::vector<int32_t> tokens;
    std::vector<LayerState> layers;
};

std::shared_ptr<const Session::Snapshot> Session::snapshot() const {
    auto snap = std::make_shared<Snapshot>();
    snap->model = &model_;
    snap->tokens = tokens_;
    for (const auto& l : layers_) snap->layers.push_back(*l);
    return snap;
}

void Session::restore(const Snapshot& snap) {
    if (snap.model != &model_ || snap.layers.size() != layers_.size() ||
        (!layers_.empty() && snap.layers[0].raw.size() != layers_[0]->raw.size()))
        fail("restore: the snapshot belongs to a session with another model or options");
    tokens_ = snap.tokens;
    for (size_t i = 0; i < layers_.size(); ++i) *layers_[i] = snap.layers[i];
}

int64_t Session::state_bytes() const {
    int64_t bytes = 0;
    for (const auto& l : layers_) bytes += l->bytes();
    return bytes;
}

int64_t Session::state_bytes_used() const {
    int64_t bytes = 0;
    for (const auto& l : layers_) bytes += l->used_bytes(pos());
    return bytes;
}

bool Session::can_rewind(int64_t n) const {
    if (n < 0 || n > pos()) return false;
    for (const auto& l : layers_)
        if (!l->can_rewind(n, pos())) return false;
    return true;
}

int64_t Session::common_prefix(const std::vector<int32_t>& tokens) const {
    const size_t m = std::min(tokens.size(), tokens_.size());
    size_t i = 0;
    while (i < m && tokens[i] == tokens_[i]) ++i;
    return int64_t(i);
}

void Session::truncate(int64_t n) {
    if (n < 0 || n > pos()) fail("cannot truncate a session of {} tokens to {}", pos(), n);
    if (n == pos()) return;
    if (can_rewind(n)) {
        for (auto& l : layers_) l->rewind(n);
        tokens_.resize(size_t(n));
        return;
    }
    // Too far back for the rings: recompute the kept prefix (exactly the state a fresh run
    // leaves).
    std::vector<int32_t> keep(tokens_.begin(), tokens_.begin() + n);
    tokens_.clear();
    for (auto& l : layers_) l->reset();
    if (!keep.empty()) eval(keep, nullptr);
}

void Session::eval(const std::vector<int32_t>& tokens, std::vector<float>* logits,
                   bool all_logits) {
    const ModelConfig& c = model_.config();
    const int64_t n = int64_t(tokens.size());
    if (n == 0) fail("nothing to evaluate");
    if (pos() + n > opt_.ctx)
        fail("context exceeded: {} tokens + {} new > context size {}", pos(), n, opt_.ctx);
    for (int32_t t : tokens)
        if (t < 0 || uint32_t(t) >= c.n_vocab)
            fail("token id {} out of range [0, {})", t, c.n_vocab);
    if (logits) logits->assign(size_t(all_logits ? n : 1) * c.n_vocab, 0.0f);
    for (int64_t b = 0; b < n; b += opt_.prefill_chunk) {
        const int64_t len = std::min(opt_.prefill_chunk, n - b);
        float* out = nullptr;
        if (logits && all_logits) out = logits->data() + size_t(b) * c.n_vocab;
        else if (logits && b + len == n) out = logits->data();
        eval_chunk(tokens.data() + b, len, out, all_logits);
    }
}

void Session::eval_chunk(const int32_t* tokens, int64_t n, float* logits, bool all_logits) {
    const ModelConfig& c = model_.config();
    const Weights& w = model_.weights();
    const int64_t D = c.n_embd, HC = c.hc;
    const int64_t p0 = pos();

    // HC state [n][HC][D]: every stream starts as the token's embedding (§3.1).
    thread_local HugeVector<float> X;  // kept between chunks (see grow())
    grow(X, n * HC * D);
    for (int64_t t = 0; t < n; ++t) {
        float* x = &X[size_t(t * HC * D)];
        quant::dequantize_row(w.token_embd.type, w.token_embd.row(tokens[t]), x, D);
        for (int64_t k = 1; k < HC; ++k) std::memcpy(x + k * D, x, sizeof(float) * D);
    }
    if (log_) {
        log_->experts.resize(size_t(p0 + n));
        log_->indexer.resize(size_t(p0 + n));
        log_->expert_margin.resize(size_t(p0 + n));
    }

    LayerContext ctx{c, model_, pool_, opt_, log_};
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        attention_sublayer(ctx, w.layers[il], *layers_[il], X.data(), n, p0);
        moe_sublayer(ctx, w.layers[il], X.data(), tokens, n, p0);
    }
    tokens_.insert(tokens_.end(), tokens, tokens + n);
    if (!logits) return;

    // Output head (§3.6) for every position or only the last.
    const int64_t first = all_logits ? 0 : n - 1;
    std::vector<float> zn(size_t(HC * D)), m(static_cast<size_t>(HC)), y(static_cast<size_t>(D)), yn(static_cast<size_t>(D));
    for (int64_t t = first; t < n; ++t) {
        const float* x = &X[size_t(t * HC * D)];
        ops::rms_norm(x, HC * D, nullptr, c.norm_eps, zn.data());
        ops::matvec(w.output_hc_fn, zn.data(), m.data(), pool_);
        const std::vector<float> a =
            ops::hc_head_weights(m.data(), w.output_hc_scale[0], w.output_hc_base, int(HC), c.hc_eps);
        ops::hc_weighted_sum(x, a.data(), int(HC), D, y.data());
        ops::rms_norm(y.data(), D, w.output_norm, c.norm_eps, yn.data());
        ops::matvec(w.output, yn.data(), logits + size_t(t - first) * c.n_vocab, pool_);
    }
}

}  // namespace ds4::model
