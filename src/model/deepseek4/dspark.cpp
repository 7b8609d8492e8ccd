// The DSpark drafter: reading and checking its file, the context rows, one draft block through
// the stages (the trunk's attention steps, attention.cpp, with a non-causal row choice; the
// trunk's MoE sublayer), the head, the Markov chain and the confidence cut.
#include "model/deepseek4/dspark.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "common/error.h"
#include "model/blocks/attention_rounds.h"
#include "model/blocks/workspace.h"
#include "model/deepseek4/forward.h"
#include "model/deepseek4/layout.h"
#include "model/deepseek4/mtp.h"
#include "ops/norm.h"
#include "quant/quant.h"

namespace ds4::deepseek4 {
namespace {

// Upstream's limits (docs/SPECULATIVE.md, "Metadata", "File and detection").
constexpr uint32_t kMinStages = 3, kMaxStages = 8, kMaxBlock = 16, kMaxTargets = 8;

ops::Matrix matrix(const gguf::File& f, const std::string& name) {
    const gguf::TensorInfo& t = f.tensor(name);
    return ops::Matrix{t.type, t.ne[1] * t.ne[2] * t.ne[3], t.ne[0], f.data(t), row_bytes(t.type, t.ne[0])};
}

const float* f32(const gguf::File& f, const std::string& name) {
    return reinterpret_cast<const float*>(f.data(f.tensor(name)));
}

// The key `k` under its first spelling present, or nullptr.
const gguf::Value* find_meta(const gguf::File& f, const std::string& k, std::string& key) {
    for (const char* prefix : {"deepseek4.dspark.", "deepseek4.dspark_", "dspark."}) {
        key = prefix + k;
        if (const gguf::Value* v = f.find(key)) return v;
    }
    fail("{}: DSpark metadata key {} missing (looked for deepseek4.dspark.{}, deepseek4.dspark_{}, dspark.{})",
         f.path(), k, k, k, k);
}

uint32_t meta_u32(const gguf::File& f, const std::string& k, std::string& key) {
    const gguf::Value* v = find_meta(f, k, key);
    if (v->type != gguf::ValueType::UINT32)
        fail("{}: DSpark metadata {} is a {}, expected u32", f.path(), key, gguf::value_type_name(v->type));
    return std::get<uint32_t>(v->scalar);
}

// FNV-1a over every tensor's name, type, shape and the first and last 64 bytes of its data:
// tells a saved context which DSpark file it came from (two seeds of one layout differ).
uint64_t fingerprint(const gguf::File& f) {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](const void* p, size_t n) {
        for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 1099511628211ull;
    };
    for (const gguf::TensorInfo& t : f.tensors()) {
        mix(t.name.data(), t.name.size());
        mix(&t.type, sizeof(t.type));
        mix(t.ne.data(), sizeof(t.ne));
        const size_t k = std::min<size_t>(64, t.n_bytes);
        mix(f.data(t), k);
        mix(f.data(t) + t.n_bytes - k, k);
    }
    return h;
}

// An empty block: the rows of the window and of the block at p for the row lists.
blocks::Rows no_rows() { return blocks::Rows(model::Batch{}); }

}  // namespace

void DsparkContext::truncate(int64_t pos) {
    if (pos >= hi_) return;
    if (pos <= lo_) lo_ = hi_ = std::max<int64_t>(0, pos);
    else hi_ = pos;
}

std::unique_ptr<DsparkHead> DsparkHead::open(Model& trunk, const std::string& path, const HeadWeights* output) {
    const ModelConfig& c = trunk.config();
    check_drafter_trunk(trunk, output, path, "a DSpark drafter");
    auto h = std::unique_ptr<DsparkHead>(new DsparkHead());
    h->trunk_ = &trunk;
    h->file_ = gguf::File::open(path, gguf::File::Load::Map);
    h->window_ = c.window;
    h->info_ = read_dspark_metadata(*h->file_, c);
    h->bind_tensors(output ? *output : trunk.head_weights());
    h->fingerprint_ = fingerprint(*h->file_);
    return h;
}

DsparkHead::~DsparkHead() = default;

DsparkInfo read_dspark_metadata(const gguf::File& f, const ModelConfig& c) {
    DsparkInfo info_;
    std::string key;
    info_.block_size = meta_u32(f, "block_size", key);
    if (info_.block_size < 1 || info_.block_size > kMaxBlock)
        fail("{}: DSpark metadata {} = {}: the block size must be 1 to {}", f.path(), key, info_.block_size, kMaxBlock);
    info_.markov_rank = meta_u32(f, "markov_rank", key);
    if (info_.markov_rank == 0) fail("{}: DSpark metadata {} = 0: the Markov rank must be positive", f.path(), key);
    info_.noise_token = meta_u32(f, "noise_token_id", key);
    if (info_.noise_token >= c.n_vocab)
        fail("{}: DSpark metadata {} = {} is outside the trunk's vocabulary of {}", f.path(), key, info_.noise_token,
             c.n_vocab);
    const gguf::Value* v = find_meta(f, "target_layer_ids", key);
    if (!v->is_array() || (v->elem_type != gguf::ValueType::UINT32 && v->elem_type != gguf::ValueType::INT32))
        fail("{}: DSpark metadata {} is not an array of u32 or i32", f.path(), key);
    if (v->elems.empty() || v->elems.size() > kMaxTargets)
        fail("{}: DSpark metadata {} has {} layers, expected 1 to {}", f.path(), key, v->elems.size(), kMaxTargets);
    for (size_t i = 0; i < v->elems.size(); ++i) {
        const int64_t l = *v->elem_int(i);
        if (l < 0 || l >= int64_t(c.n_layer))
            fail("{}: DSpark metadata {}[{}] = {} is not a layer of the {}-layer trunk", f.path(), key, i, l,
                 c.n_layer);
        if (i > 0 && l <= int64_t(info_.target_layers.back()))
            fail("{}: DSpark metadata {}: layers must be strictly increasing ({} after {})", f.path(), key, l,
                 info_.target_layers.back());
        info_.target_layers.push_back(uint32_t(l));
    }
    return info_;
}

void DsparkHead::bind_tensors(const HeadWeights& output) {
    const gguf::File& f = *file_;
    const ModelConfig& c = trunk_->config();
    int64_t top = -1;  // the highest stage N of the tensors named mtp.<N>.…
    for (const gguf::TensorInfo& t : f.tensors()) {
        unsigned s = 0;
        char dot = 0;
        if (std::sscanf(t.name.c_str(), "mtp.%u%c", &s, &dot) == 2 && dot == '.') top = std::max<int64_t>(top, s);
    }
    if (top + 1 < kMinStages || top + 1 > kMaxStages)
        fail("{}: {} DSpark stages (tensors mtp.<s>.*), expected {} to {}", f.path(), top + 1, kMinStages,
             kMaxStages);
    info_.stages = uint32_t(top + 1);
    // Each stage a ratio-0, top-k block; its non-tensor parameters (the SwiGLU clamps) those of
    // trunk layer s, as upstream runs stage s through its layer encoder with layer index s.
    for (uint32_t s = 0; s < info_.stages; ++s)
        stages_.push_back(ExtraBlock::bind(*trunk_, f, {.prefix = fmt::format("mtp.{}.", s),
                                                        .as_layer = std::min(s, c.n_layer - 1)}));
    const int64_t D = c.n_embd, HC = c.hc, V = c.n_vocab, R = info_.markov_rank;
    const int64_t T = int64_t(info_.target_layers.size());
    using C = TensorClass;
    auto check = [&](const std::string& name, std::vector<int64_t> ne, C cls) {
        validate_tensor(f, c, TensorSpec{name, std::move(ne), cls, -1});
        return name;
    };
    main_proj = matrix(f, check("mtp.0.main_proj.weight", {T * D, D}, C::Dense));
    main_norm = f32(f, check("mtp.0.main_norm.weight", {D}, C::Norm));
    const std::string last = fmt::format("mtp.{}.", info_.stages - 1);
    head = output;
    head.norm = f32(f, check(last + "norm.weight", {D}, C::Norm));
    head.hc_fn = matrix(f, check(last + "hc_head_fn.weight", {HC * D, HC}, C::Hc));
    head.hc_base = f32(f, check(last + "hc_head_base.weight", {HC}, C::Norm));
    head.hc_scale = f32(f, check(last + "hc_head_scale.weight", {1}, C::Norm));
    markov_w1 = matrix(f, check(last + "markov_head.markov_w1.weight", {R, V}, C::Dense));
    markov_w2 = matrix(f, check(last + "markov_head.markov_w2.weight", {R, V}, C::Dense));
    const ops::Matrix conf = matrix(f, check(last + "confidence_head.proj.weight", {D + R, 1}, C::Dense));
    confidence.resize(size_t(D + R));
    quant::dequantize_row(conf.type, conf.row(0), confidence.data(), D + R);
}

DsparkContext DsparkHead::new_context(bool qat) const {
    const ModelConfig& c = trunk_->config();
    DsparkContext ctx;
    ctx.slots_ = window_ + 1;
    ctx.qat_ = qat;
    ctx.c_.resize(size_t(ctx.slots_ * c.n_embd));
    ctx.kv_.resize(size_t(info_.stages * ctx.slots_ * c.head_dim));
    return ctx;
}

// c(t) [n][n_embd] of n rows whose target-layer states are captured[j * stride + t * hc_dim].
void DsparkHead::context_rows(const float* captured, int64_t n, int64_t stride, float* c) {
    const ModelConfig& cfg = trunk_->config();
    const int64_t D = cfg.n_embd, HC = cfg.hc, T = int64_t(info_.target_layers.size());
    ThreadPool& pool = trunk_->pool();
    std::vector<float> u(size_t(n * T * D)), proj(size_t(n * D));
    blocks::for_tokens(pool, n, [&](int64_t t) {
        for (int64_t j = 0; j < T; ++j) {
            const float* x = captured + j * stride + t * HC * D;
            float* f = &u[size_t((t * T + j) * D)];
            for (int64_t i = 0; i < D; ++i) {
                float sum = 0;
                for (int64_t k = 0; k < HC; ++k) sum += x[k * D + i];
                f[i] = sum / float(HC);
            }
        }
    });
    ops::matmul(main_proj, u.data(), n, proj.data(), pool);
    blocks::for_tokens(pool, n, [&](int64_t t) { ops::rms_norm(&proj[size_t(t * D)], D, main_norm, cfg.norm_eps, c + t * D); });
}

// Stage s's KV rows [n][head_dim] of the context rows c [n][n_embd] at pos0 …: the attention
// input of c(t) in every stream, attn_kv, the KV row steps.
void DsparkHead::context_kv(uint32_t s, const float* c, int64_t n, int64_t pos0, bool qat, float* kv) {
    const ModelConfig& cfg = trunk_->config();
    const int64_t D = cfg.n_embd, HC = cfg.hc;
    const ExtraBlock& blk = *stages_[s];
    const blocks::Rows rows = no_rows();
    const LayerContext ctx{cfg, *trunk_, trunk_->pool(), *trunk_->ws_, rows, blk.experts(), trunk_layer_state, false};
    ScratchArena& scratch = ctx.ws.arena;
    scratch.reset();
    float* X = scratch.take(n * HC * D);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t k = 0; k < HC; ++k) std::memcpy(X + (t * HC + k) * D, c + t * D, sizeof(float) * size_t(D));
    float* a = scratch.take(n * D);
    attention_input(ctx, blk.weights(), X, n, a);
    ops::matmul(blk.weights().kv, a, n, kv, ctx.pool);
    const ops::Rope& rope = trunk_->rope_for_ratio(0);
    blocks::for_tokens(ctx.pool, n, [&](int64_t t) {
        attention_kv_row(cfg, blk.weights(), rope, kv + t * cfg.head_dim, pos0 + t, qat);
    });
}

void DsparkHead::commit(DsparkContext& ctx, int64_t pos, int64_t n, const float* captured) {
    const ModelConfig& cfg = trunk_->config();
    if (ctx.kv_.size() != size_t(info_.stages * ctx.slots_ * cfg.head_dim) || ctx.slots_ != window_ + 1)
        fail("DSpark: a context of another drafter");
    if (pos < 0 || n < 0) fail("DSpark: commit of {} rows at position {}", n, pos);
    ctx.truncate(pos);
    if (pos > ctx.hi_) ctx.lo_ = ctx.hi_ = pos;  // a gap: what is held no longer leads to pos
    if (n == 0) return;
    if (!captured) fail("DSpark: commit without the target layers' states");
    const int64_t D = cfg.n_embd, Dh = cfg.head_dim, HCD = cfg.hc_dim(), slots = ctx.slots_;
    const int64_t skip = std::max<int64_t>(0, n - slots), m = n - skip, p0 = pos + skip;
    std::lock_guard lock(trunk_->mu_);
    std::vector<float> c(size_t(m * D)), kv(size_t(m * Dh));
    context_rows(captured + skip * HCD, m, n * HCD, c.data());
    for (int64_t t = 0; t < m; ++t)
        std::memcpy(&ctx.c_[size_t(((p0 + t) % slots) * D)], &c[size_t(t * D)], sizeof(float) * size_t(D));
    for (uint32_t s = 0; s < info_.stages; ++s) {
        context_kv(s, c.data(), m, p0, ctx.qat_, kv.data());
        float* ring = &ctx.kv_[size_t(int64_t(s) * slots * Dh)];
        for (int64_t t = 0; t < m; ++t)
            std::memcpy(ring + ((p0 + t) % slots) * Dh, &kv[size_t(t * Dh)], sizeof(float) * size_t(Dh));
    }
    ctx.hi_ = pos + n;
    ctx.lo_ = std::max(ctx.lo_, ctx.hi_ - slots);
}

namespace {

constexpr uint32_t kContextVersion = 1;

void put(std::vector<uint8_t>& out, const void* p, size_t n) {
    const size_t at = out.size();
    out.resize(at + n);
    if (n) std::memcpy(out.data() + at, p, n);
}

// Reads little-endian fields; every read checked against the bytes left (false: too few).
struct Bytes {
    std::span<const uint8_t> b;
    size_t at = 0;
    bool get(void* p, uint64_t n) {
        if (n > b.size() - at) return false;
        if (n) std::memcpy(p, b.data() + at, size_t(n));
        at += size_t(n);
        return true;
    }
};

}  // namespace

// version u32, fingerprint u64, stages u32, n_embd u32, head_dim u32, qat u32, lo u64, hi u64,
// c f32[hi-lo][n_embd], kv f32[stages][hi-lo][head_dim] (position order).
std::vector<uint8_t> DsparkHead::save_context(const DsparkContext& ctx) const {
    const ModelConfig& c = trunk_->config();
    const uint32_t dims[5] = {info_.stages, c.n_embd, c.head_dim, ctx.qat_ ? 1u : 0u, 0};
    const int64_t D = c.n_embd, Dh = c.head_dim, slots = ctx.slots_;
    std::vector<uint8_t> out;
    put(out, &kContextVersion, 4);
    put(out, &fingerprint_, 8);
    put(out, dims, 16);
    put(out, &ctx.lo_, 8);
    put(out, &ctx.hi_, 8);
    for (int64_t t = ctx.lo_; t < ctx.hi_; ++t) put(out, &ctx.c_[size_t((t % slots) * D)], sizeof(float) * size_t(D));
    for (uint32_t st = 0; st < info_.stages; ++st)
        for (int64_t t = ctx.lo_; t < ctx.hi_; ++t)
            put(out, &ctx.kv_[size_t((int64_t(st) * slots + t % slots) * Dh)], sizeof(float) * size_t(Dh));
    return out;
}

bool DsparkHead::load_context(DsparkContext& ctx, std::span<const uint8_t> bytes, int64_t pos) const {
    const ModelConfig& c = trunk_->config();
    ctx.clear();
    if (ctx.slots_ != window_ + 1 || ctx.kv_.size() != size_t(info_.stages * ctx.slots_ * c.head_dim)) return false;
    Bytes r{bytes};
    uint32_t version = 0, dims[4] = {};
    uint64_t print = 0;
    int64_t lo = 0, hi = 0;
    if (!r.get(&version, 4) || !r.get(&print, 8) || !r.get(dims, 16) || !r.get(&lo, 8) || !r.get(&hi, 8)) return false;
    if (version != kContextVersion || print != fingerprint_ || dims[0] != info_.stages || dims[1] != c.n_embd ||
        dims[2] != c.head_dim || dims[3] != (ctx.qat_ ? 1u : 0u))
        return false;
    const int64_t D = c.n_embd, Dh = c.head_dim, slots = ctx.slots_;
    if (hi != pos || lo < 0 || lo > hi || hi - lo > slots) return false;
    const uint64_t n = uint64_t(hi - lo);
    if (r.b.size() - r.at != n * 4 * (uint64_t(D) + uint64_t(info_.stages) * uint64_t(Dh))) return false;
    for (int64_t t = lo; t < hi; ++t) r.get(&ctx.c_[size_t((t % slots) * D)], sizeof(float) * uint64_t(D));
    for (uint32_t st = 0; st < info_.stages; ++st)
        for (int64_t t = lo; t < hi; ++t)
            r.get(&ctx.kv_[size_t((int64_t(st) * slots + t % slots) * Dh)], sizeof(float) * uint64_t(Dh));
    ctx.lo_ = lo;
    ctx.hi_ = hi;
    return true;
}

// Stage s on the block X [B+1][hc][n_embd] at p: the attention sublayer (all rows give KV
// rows; the draft rows 1..B query the window and every block row), then the FFN of the draft
// rows. Row 0 is left as it is.
void DsparkHead::run_stage(uint32_t s, const DsparkContext& dc, int64_t p, float* X) {
    const ModelConfig& cfg = trunk_->config();
    const int64_t B = info_.block_size, n = B + 1, D = cfg.n_embd, HCD = cfg.hc_dim();
    const int64_t H = cfg.n_head, Dh = cfg.head_dim, Rq = cfg.q_lora_rank;
    const ExtraBlock& blk = *stages_[s];
    const LayerWeights& w = blk.weights();
    const ops::Rope& rope = trunk_->rope_for_ratio(0);
    // Block row 0 (c(p)) and row 1 (x_p) at p, row 1+d at p+d; the draft rows for the FFN.
    blocks::Rows rows = no_rows(), draft_rows = no_rows();
    rows.pos = {p};
    for (int64_t d = 0; d < B; ++d) rows.pos.push_back(p + d);
    rows.n = n;
    draft_rows.pos.assign(rows.pos.begin() + 1, rows.pos.end());
    draft_rows.token.assign(size_t(B), 0);  // read by hash routing only; a stage routes by top-k
    draft_rows.n = B;
    const LayerContext ctx{cfg, *trunk_, trunk_->pool(), *trunk_->ws_, rows, blk.experts(), trunk_layer_state, false};
    ScratchArena& scratch = ctx.ws.arena;
    scratch.reset();
    float* a = scratch.take(n * D);
    const std::vector<ops::HcMix> mixes = attention_input(ctx, w, X, n, a);
    float* qr = scratch.take(n * Rq);
    float* qn = scratch.take(B * Rq);
    float* q = scratch.take(B * H * Dh);
    float* kv = scratch.take(n * Dh);
    const std::vector<ops::Product> products = {{&w.q_a, qr}, {&w.kv, kv}};
    ops::matmul_shared_input(a, n, D, products, ctx.pool);
    for (int64_t t = 0; t < n; ++t) attention_kv_row(cfg, w, rope, kv + t * Dh, rows.pos[size_t(t)], dc.qat_);
    attention_queries(ctx, w, rope, qr + Rq, B, rows.pos.data() + 1, qn, q);

    // Non-causal: every draft row sees the window's rows, then all B+1 rows of the block.
    std::vector<const float*> keys;
    const float* ring = &dc.kv_[size_t(int64_t(s) * dc.slots_ * Dh)];
    for (int64_t t = std::max(dc.lo_, p - window_); t < p; ++t) keys.push_back(ring + (t % dc.slots_) * Dh);
    for (int64_t t = 0; t < n; ++t) keys.push_back(kv + t * Dh);
    const ops::AttentionRows att{keys.data(), keys.data(), int64_t(keys.size()), int(Dh), int(Dh)};
    for (int64_t d = 0; d < B; ++d) {
        float* qd = q + d * H * Dh;
        blocks::attend_position(qd, int(H), att, w.sinks, 1.0f / std::sqrt(float(Dh)), qd, &ctx.pool);
        rope.apply(qd, int(H), int(Dh), p + d, /*inverse=*/true);
    }
    attention_output(ctx, w, q, B, mixes.data() + 1, X + HCD);

    const LayerContext fctx{cfg, *trunk_, trunk_->pool(), *trunk_->ws_, draft_rows, blk.experts(), trunk_layer_state,
                            false};
    moe_sublayer(fctx, w, X + HCD);
}

DsparkBlock DsparkHead::draft(const DsparkContext& ctx, int64_t p, int32_t token, float threshold) {
    const ModelConfig& cfg = trunk_->config();
    if (ctx.kv_.size() != size_t(info_.stages * ctx.slots_ * cfg.head_dim) || ctx.slots_ != window_ + 1)
        fail("DSpark: a context of another drafter");
    if (p < ctx.lo_ || p >= ctx.hi_)
        fail("DSpark: no context row for position {} (the context holds {} .. {})", p, ctx.lo_, ctx.hi_ - 1);
    if (token < 0 || int64_t(token) >= int64_t(cfg.n_vocab)) fail("DSpark: token id {} out of range", token);
    const int64_t B = info_.block_size, D = cfg.n_embd, HC = cfg.hc, HCD = cfg.hc_dim(), V = cfg.n_vocab;
    std::lock_guard lock(trunk_->mu_);
    // Row 0: c(p); row 1: x_p's embedding; rows 2..B: the noise token's; each in every stream.
    std::vector<float> X(size_t((B + 1) * HCD));
    std::memcpy(X.data(), &ctx.c_[size_t((p % ctx.slots_) * D)], sizeof(float) * size_t(D));
    const ops::Matrix& embd = trunk_->weights().token_embd;
    for (int64_t r = 1; r <= B; ++r)
        quant::dequantize_row(embd.type, embd.row(r == 1 ? token : int32_t(info_.noise_token)), X.data() + r * HCD, D);
    for (int64_t r = 0; r <= B; ++r)
        for (int64_t k = 1; k < HC; ++k) std::memcpy(X.data() + r * HCD + k * D, X.data() + r * HCD, sizeof(float) * size_t(D));
    for (uint32_t s = 0; s < info_.stages; ++s) run_stage(s, ctx, p, X.data());

    DsparkBlock b;
    b.base_logits.resize(size_t(B * V));
    b.hidden.resize(size_t(B * D));
    std::vector<const float*> in(static_cast<size_t>(B));
    std::vector<float*> out(static_cast<size_t>(B));
    for (int64_t d = 0; d < B; ++d) {
        in[size_t(d)] = X.data() + (d + 1) * HCD;
        out[size_t(d)] = b.base_logits.data() + d * V;
    }
    trunk_->head_rows(head, in, out, b.hidden.data());
    markov_chain(b, token, threshold);
    return b;
}

// The greedy chain over the block's rows with the Markov bias, the confidences and the cut.
void DsparkHead::markov_chain(DsparkBlock& b, int32_t token, float threshold) {
    const ModelConfig& cfg = trunk_->config();
    const int64_t B = info_.block_size, D = cfg.n_embd, V = cfg.n_vocab, R = info_.markov_rank;
    b.logits.resize(size_t(B * V));
    std::vector<float> state(static_cast<size_t>(R));
    int32_t prev = token;
    for (int64_t d = 0; d < B; ++d) {
        quant::dequantize_row(markov_w1.type, markov_w1.row(prev), state.data(), R);
        float* l = b.logits.data() + d * V;
        ops::matmul(markov_w2, state.data(), 1, l, trunk_->pool());
        const float* base = b.base_logits.data() + d * V;
        for (int64_t v = 0; v < V; ++v) l[v] += base[v];
        prev = int32_t(std::max_element(l, l + V) - l);  // the first of equal maxima
        b.proposals.push_back(prev);
        double kappa = 0;
        for (int64_t i = 0; i < D; ++i) kappa += double(confidence[size_t(i)]) * b.hidden[size_t(d * D + i)];
        for (int64_t r = 0; r < R; ++r) kappa += double(confidence[size_t(D + r)]) * state[size_t(r)];
        b.confidence_logits.push_back(float(kappa));
        b.confidence.push_back(float(1.0 / (1.0 + std::exp(-kappa))));
    }
    b.cut = int(B);
    if (threshold > 0)
        for (int64_t d = 0; d < B; ++d)
            if (b.confidence[size_t(d)] < threshold) {
                b.cut = int(d);
                break;
            }
}

}  // namespace ds4::deepseek4
