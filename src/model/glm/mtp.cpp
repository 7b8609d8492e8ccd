#include "model/glm/mtp.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "common/error.h"
#include "model/blocks/batch_check.h"
#include "model/glm/forward.h"
#include "model/glm/layout.h"
#include "model/tensor_binder.h"
#include "ops/norm.h"
#include "quant/quant.h"

namespace ds4::glm {
namespace {

// The head's timeline: the block's latent row of every position (its attention sees them all).
class MtpSequence final : public model::Sequence {
public:
    MtpSequence(const MtpHead& head, const GlmConfig& c, model::SequenceOptions opt)
        : model::Sequence(opt), head_(&head), state(int64_t(c.key_dim()), 0, opt.ctx) {
        if (opt.ctx <= 0 || opt.ctx > kMaxContext) fail("MTP: context size {} out of range", opt.ctx);
    }
    bool can_rewind(int64_t n) const override { return n >= 0 && n <= pos(); }
    void rewind(int64_t n) override {
        if (!can_rewind(n)) fail("MTP: cannot rewind {} positions to {}", pos(), n);
        tokens_.resize(size_t(n));
    }
    void clear() override { tokens_.clear(); }
    int64_t state_bytes() const override { return state.bytes(); }
    int64_t state_bytes_used() const override { return state.used_bytes(pos()); }
    std::unique_ptr<model::Sequence> clone() const override { return std::make_unique<MtpSequence>(*this); }
    void assign(const model::Sequence& other) override {
        const auto* o = dynamic_cast<const MtpSequence*>(&other);
        if (!o || o->head_ != head_ || o->opt_.ctx != opt_.ctx) fail("MTP: restore from a sequence of another head");
        *this = *o;
    }
    void append(std::span<const int32_t> t) { tokens_.insert(tokens_.end(), t.begin(), t.end()); }

    const MtpHead* head_;
    LayerState state;
};

LayerState& mtp_state(const Rows::Span& sp, uint32_t) { return static_cast<MtpSequence*>(sp.seq)->state; }

}  // namespace

MtpHead::~MtpHead() = default;

std::unique_ptr<MtpHead> MtpHead::embedded(Model& trunk) {
    const GlmConfig& c = trunk.config();
    const gguf::File& f = trunk.file();
    const uint32_t L = c.n_layer;
    const std::string prefix = fmt::format("blk.{}.", L);
    if (c.n_nextn == 0 || !f.find_tensor(prefix + "nextn.eh_proj.weight")) return nullptr;
    if (!trunk.info().range.whole(c.n_layer))
        fail("{}: the MTP block needs the whole model (this one holds layers {})", f.path(), trunk.info().range.str());
    const std::vector<TensorSpec> specs = mtp_layout(c);
    validate_specs(f, specs);
    for (const TensorSpec& s : specs)
        if (const gguf::TensorInfo* t = f.find_tensor(s.name); t && !f.holds(*t))
            fail("{}: tensor {} is not in memory (the MTP block does not run with --ssd-streaming)", f.path(), s.name);
    auto h = std::unique_ptr<MtpHead>(new MtpHead());
    h->trunk_ = &trunk;
    h->layer_ = L;
    h->block_ = bind_layer(f, c, prefix, int(L), /*full_indexer=*/false, /*dense=*/false);
    const model::TensorBinder b(f);
    h->eh_proj = b.matrix(prefix + "nextn.eh_proj.weight");
    h->enorm = b.f32(prefix + "nextn.enorm.weight");
    h->hnorm = b.f32(prefix + "nextn.hnorm.weight");
    h->norm = b.has(prefix + "nextn.shared_head_norm.weight") ? b.f32(prefix + "nextn.shared_head_norm.weight")
                                                              : trunk.weights().output_norm;
    h->embed = b.has(prefix + "nextn.embed_tokens.weight") ? b.matrix(prefix + "nextn.embed_tokens.weight")
                                                           : trunk.weights().token_embd;
    h->head = b.has(prefix + "nextn.shared_head_head.weight") ? b.matrix(prefix + "nextn.shared_head_head.weight")
                                                              : trunk.weights().output;
    std::vector<model::LayerExperts> experts(L + 1);
    experts[L] = {h->block_.gate_exps, h->block_.up_exps, h->block_.down_exps};
    h->experts_ = std::make_shared<model::ResidentExperts>(std::move(experts));
    return h;
}

std::unique_ptr<model::Sequence> MtpHead::new_sequence(const model::SequenceOptions& opt) const {
    return std::make_unique<MtpSequence>(*this, trunk_->config(), opt);
}

int64_t MtpHead::sequence_bytes(const model::SequenceOptions& opt) const {
    return opt.ctx * int64_t(trunk_->config().key_dim()) * int64_t(sizeof(float));
}

void MtpHead::trunk_rows(const float* X, int64_t n, float* out) const {
    const GlmConfig& c = trunk_->config();
    for (int64_t t = 0; t < n; ++t)
        ops::rms_norm(X + t * c.n_embd, c.n_embd, trunk_->weights().output_norm, c.norm_eps, out + t * c.n_embd);
}

void MtpHead::eval(model::Sequence& seq, std::span<const int32_t> tokens, const float* h, float* out_hidden,
                   float* logits, model::Logits want) {
    const GlmConfig& c = trunk_->config();
    const int64_t n = int64_t(tokens.size()), D = c.n_embd, V = c.n_vocab;
    const model::BatchItem item{.seq = &seq, .tokens = tokens};
    const model::Batch batch(&item, 1);
    blocks::check_batch(batch, c.n_vocab, true, [this](const model::Sequence& s) {
        const auto* m = dynamic_cast<const MtpSequence*>(&s);
        return m && m->head_ == this;
    });
    std::lock_guard lock(trunk_->mu_);
    Workspace& ws = *trunk_->ws_;
    ThreadPool& pool = trunk_->pool();
    // X = eh_proj [enorm(embed x) | hnorm(h)].
    std::vector<float> eh(size_t(n * 2 * D));
    std::vector<float> e(static_cast<size_t>(D));
    for (int64_t t = 0; t < n; ++t) {
        quant::dequantize_row(embed.type, embed.row(tokens[size_t(t)]), e.data(), D);
        ops::rms_norm(e.data(), D, enorm, c.norm_eps, &eh[size_t(t * 2 * D)]);
        ops::rms_norm(h + t * D, D, hnorm, c.norm_eps, &eh[size_t(t * 2 * D + D)]);
    }
    float* X = grow(ws.X, n * D);
    ops::matmul(eh_proj, eh.data(), n, X, pool);

    const Rows rows(batch);
    TopK top_k;  // no choice: the block attends to every earlier row
    top_k.rows.resize(size_t(n));
    top_k.chosen.assign(size_t(n), 0);
    LayerContext ctx{c, *trunk_, pool, ws, rows, top_k, *experts_, mtp_state, false};
    attention_sublayer(ctx, block_, X);
    ffn_sublayer(ctx, block_, X);
    static_cast<MtpSequence&>(seq).append(tokens);

    std::vector<float> normed(size_t(n * D));
    for (int64_t t = 0; t < n; ++t) ops::rms_norm(X + t * D, D, norm, c.norm_eps, &normed[size_t(t * D)]);
    // Rows of the outputs: all (All, None) or the last (Last).
    const int64_t first = want == model::Logits::Last ? n - 1 : 0;
    if (out_hidden) std::memcpy(out_hidden, &normed[size_t(first * D)], sizeof(float) * size_t((n - first) * D));
    if (!logits || want == model::Logits::None) return;
    for (int64_t t = first; t < n; ++t) {
        ops::Activations& act = ws.head_in;
        act.set(&normed[size_t(t * D)], 1, D, quant::dot_type(head.type), &pool);
        const void* row = act.row(0);
        float* out = logits + (t - first) * V;
        const ops::MatmulJob job{head, &row, &out, 1};
        ops::matmul_jobs(&job, 1, pool);
    }
}

}  // namespace ds4::glm
