// The MTP head: binding either layout, the input projections, and the block and head run
// through the trunk model.
#include "model/deepseek4/mtp.h"

#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "common/error.h"
#include "model/blocks/workspace.h"
#include "model/deepseek4/layout.h"
#include "ops/norm.h"
#include "quant/quant.h"

namespace ds4::deepseek4 {
namespace {

ops::Matrix matrix(const gguf::File& f, const std::string& name) {
    const gguf::TensorInfo& t = f.tensor(name);
    return ops::Matrix{t.type, t.ne[1] * t.ne[2] * t.ne[3], t.ne[0], f.data(t), row_bytes(t.type, t.ne[0])};
}

const float* f32(const gguf::File& f, const std::string& name) {
    return reinterpret_cast<const float*>(f.data(f.tensor(name)));
}

std::string nextn_prefix(const ModelConfig& c) { return fmt::format("blk.{}.", c.n_layer); }

}  // namespace

HeadWeights output_head(const gguf::File& f, const ModelConfig& c) {
    for (const TensorSpec& s : tensor_layout(c)) {
        if (s.name.rfind("output", 0) != 0) continue;
        validate_tensor(f, c, s);
        if (!f.holds(f.tensor(s.name)))
            fail("{}: tensor {} was not loaded (a layer-range load): bind the output head from a mapping of the file",
                 f.path(), s.name);
    }
    return {matrix(f, "output_hc_fn.weight"), f32(f, "output_hc_base.weight"), f32(f, "output_hc_scale.weight"),
            f32(f, "output_norm.weight"), matrix(f, "output.weight")};
}

void check_drafter_trunk(const Model& trunk, const HeadWeights* output, const std::string& path, const char* what) {
    const model::LayerRange& r = trunk.info().range;
    if (!output && !r.whole(trunk.config().n_layer))
        fail("{}: {} needs the whole model (embedding and output head), not layers {}", path, what, r.str());
    if (output && !r.embedding())
        fail("{}: {} needs the token embedding (layers from 0), not layers {}", path, what, r.str());
}

std::unique_ptr<MtpHead> MtpHead::open(Model& trunk, const std::string& path, const HeadWeights* output) {
    if (path == trunk.file().path()) {
        std::unique_ptr<MtpHead> h = embedded(trunk, output);
        if (!h)
            fail("{}: no MTP head: the model file has no {}nextn.eh_proj.weight", path, nextn_prefix(trunk.config()));
        return h;
    }
    std::unique_ptr<gguf::File> f = gguf::File::open(path, gguf::File::Load::Map);
    Layout layout = Layout::Support;
    if (f->find_tensor("mtp.0.e_proj.weight")) {
        layout = Layout::Support;
    } else if (f->find_tensor(nextn_prefix(trunk.config()) + "nextn.eh_proj.weight")) {
        layout = Layout::NextN;
    } else {
        fail("{}: no MTP head for a {}-layer model: neither mtp.0.e_proj.weight (an MTP support GGUF) nor "
             "{}nextn.eh_proj.weight (llama.cpp's layout) is in the file",
             path, trunk.config().n_layer, nextn_prefix(trunk.config()));
    }
    std::unique_ptr<MtpHead> h = bind(trunk, *f, layout, output);
    h->own_file_ = std::move(f);
    return h;
}

std::unique_ptr<MtpHead> MtpHead::embedded(Model& trunk, const HeadWeights* output) {
    if (!trunk.file().find_tensor(nextn_prefix(trunk.config()) + "nextn.eh_proj.weight")) return nullptr;
    return bind(trunk, trunk.file(), Layout::NextN, output);
}

MtpHead::~MtpHead() = default;

std::unique_ptr<MtpHead> MtpHead::bind(Model& trunk, const gguf::File& f, Layout layout, const HeadWeights* output) {
    const ModelConfig& c = trunk.config();
    check_drafter_trunk(trunk, output, f.path(), "an MTP head");
    const int64_t D = c.n_embd, HC = c.hc, V = c.n_vocab;
    using C = TensorClass;
    auto check = [&](const std::string& name, std::vector<int64_t> ne, C cls) {
        validate_tensor(f, c, TensorSpec{name, std::move(ne), cls, -1});
        return name;
    };
    auto h = std::unique_ptr<MtpHead>(new MtpHead());
    h->trunk_ = &trunk;
    h->file_ = &f;
    h->layout_ = layout;
    const std::string p = layout == Layout::Support ? "mtp.0." : nextn_prefix(c);
    // The block: ratio 0 (raw window only), routed by its biased top-k; the per-layer
    // parameters that are not tensors (the SwiGLU clamps) are those of the last trunk layer.
    h->block_ = ExtraBlock::bind(trunk, f, {.prefix = p, .as_layer = c.n_layer - 1, .ratio = 0, .hash = false});
    h->head = output ? *output : trunk.head_weights();
    h->embed = trunk.weights().token_embd;
    if (layout == Layout::Support) {
        h->e_proj = matrix(f, check(p + "e_proj.weight", {D, D}, C::Dense));
        h->h_proj = matrix(f, check(p + "h_proj.weight", {D, D}, C::Dense));
        h->enorm = f32(f, check(p + "enorm.weight", {D}, C::Norm));
        h->hnorm = f32(f, check(p + "hnorm.weight", {D}, C::Norm));
        h->head.norm = f32(f, check(p + "norm.weight", {D}, C::Norm));
        h->head.hc_fn = matrix(f, check(p + "hc_head_fn.weight", {HC * D, HC}, C::Hc));
        h->head.hc_base = f32(f, check(p + "hc_head_base.weight", {HC}, C::Norm));
        h->head.hc_scale = f32(f, check(p + "hc_head_scale.weight", {1}, C::Norm));
        return h;
    }
    const std::string n = p + "nextn.";
    h->eh_proj = matrix(f, check(n + "eh_proj.weight", {2 * D, D}, C::Dense));
    h->enorm = f32(f, check(n + "enorm.weight", {D}, C::Norm));
    h->hnorm = f32(f, check(n + "hnorm.weight", {D}, C::Norm));
    // An MTP-only file carries the head's HC weights as its root output_hc_* (and may carry
    // its own norm, projection and embedding); in the main file those are the trunk's.
    if (f.find_tensor("output_hc_fn.weight")) {
        h->head.hc_fn = matrix(f, check("output_hc_fn.weight", {HC * D, HC}, C::Hc));
        h->head.hc_base = f32(f, check("output_hc_base.weight", {HC}, C::Norm));
        h->head.hc_scale = f32(f, check("output_hc_scale.weight", {1}, C::Norm));
    }
    if (f.find_tensor(n + "shared_head_norm.weight"))
        h->head.norm = f32(f, check(n + "shared_head_norm.weight", {D}, C::Norm));
    else if (f.find_tensor("output_norm.weight"))
        h->head.norm = f32(f, check("output_norm.weight", {D}, C::Norm));
    if (f.find_tensor(n + "shared_head_head.weight"))
        h->head.output = matrix(f, check(n + "shared_head_head.weight", {D, V}, C::Output));
    if (f.find_tensor(n + "embed_tokens.weight"))
        h->embed = matrix(f, check(n + "embed_tokens.weight", {D, V}, C::Embd));
    return h;
}

std::unique_ptr<model::Sequence> MtpHead::new_sequence(const model::SequenceOptions& opt) const {
    return block_->new_sequence(opt);
}

// X [n][hc][n_embd] = the block's input rows (the top of mtp.h).
void MtpHead::project(std::span<const int32_t> tokens, const float* h, float* X) const {
    const ModelConfig& c = trunk_->config();
    const int64_t D = c.n_embd, HC = c.hc, n = int64_t(tokens.size());
    ThreadPool& pool = trunk_->pool();
    std::vector<float> e(size_t(n * D)), hn(size_t(n * HC * D));
    blocks::for_tokens(pool, n, [&](int64_t t) {
        std::vector<float> row(static_cast<size_t>(D));
        quant::dequantize_row(embed.type, embed.row(tokens[size_t(t)]), row.data(), D);
        ops::rms_norm(row.data(), D, enorm, c.norm_eps, e.data() + t * D);
        for (int64_t k = 0; k < HC; ++k)
            ops::rms_norm(h + (t * HC + k) * D, D, hnorm, c.norm_eps, hn.data() + (t * HC + k) * D);
    });
    if (layout_ == Layout::NextN) {
        // [e | h'_k] per stream, one product over 2·n_embd inputs (llama.cpp's eh_proj).
        std::vector<float> cat(size_t(n * HC * 2 * D));
        for (int64_t r = 0; r < n * HC; ++r) {
            std::memcpy(cat.data() + r * 2 * D, e.data() + (r / HC) * D, sizeof(float) * size_t(D));
            std::memcpy(cat.data() + r * 2 * D + D, hn.data() + r * D, sizeof(float) * size_t(D));
        }
        ops::matmul(eh_proj, cat.data(), n * HC, X, pool);
        return;
    }
    std::vector<float> ep(size_t(n * D));
    ops::matmul(e_proj, e.data(), n, ep.data(), pool);
    ops::matmul(h_proj, hn.data(), n * HC, X, pool);
    for (int64_t r = 0; r < n * HC; ++r) {
        float* x = X + r * D;
        const float* a = ep.data() + (r / HC) * D;
        for (int64_t i = 0; i < D; ++i) x[i] += a[i];
    }
}

void MtpHead::eval(model::Sequence& seq, std::span<const int32_t> tokens, const float* h, float* out_hidden,
                   float* logits, model::Logits want) {
    const model::BatchItem it{&seq, tokens};
    const model::Batch b(&it, 1);
    block_->check(b);
    if (!h) fail("MTP head: no hidden states given");
    const ModelConfig& c = trunk_->config();
    const int64_t width = int64_t(c.hc) * c.n_embd, n = int64_t(tokens.size()), V = c.n_vocab;
    std::lock_guard lock(trunk_->mu_);
    float* X = blocks::grow(trunk_->ws_->X, n * width);
    project(tokens, h, X);
    trunk_->block_unlocked(*block_, b, X);
    const int64_t first = want == model::Logits::Last ? n - 1 : 0;
    if (want == model::Logits::None || n == 0) return;
    if (out_hidden) std::memcpy(out_hidden, X + first * width, sizeof(float) * size_t((n - first) * width));
    if (!logits) return;
    std::vector<const float*> in;
    std::vector<float*> out;
    for (int64_t t = first; t < n; ++t) {
        in.push_back(X + t * width);
        out.push_back(logits + (t - first) * V);
    }
    trunk_->head_rows(head, in, out);
}

}  // namespace ds4::deepseek4
