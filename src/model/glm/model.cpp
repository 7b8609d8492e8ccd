// Loading a glm-dsa GGUF (or a layer range of it), its identity, sequences and saved states.
#include "model/glm/model.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"
#include "model/blocks/workspace.h"
#include "model/file_hashes.h"
#include "model/glm/layout.h"
#include "model/glm/sequence.h"
#include "model/state_file.h"

namespace ds4::glm {

Model::Model(int threads) : model::Model(threads), ws_(std::make_unique<blocks::Workspace>()) {}
Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& path, const model::OpenOptions& opt) {
    if (opt.threads < 1) fail("thread count {} must be at least 1", opt.threads);
    auto m = std::unique_ptr<Model>(new Model(opt.threads));
    m->file_ = gguf::File::open(path, gguf::File::Load::Map);
    m->cfg_ = GlmConfig::from_gguf(*m->file_);
    const GlmConfig& c = m->cfg_;
    const model::LayerRange range = model::LayerRange::parse(opt.layers, c.n_layer);
    if (!c.indexer_is_full(range.first))
        fail("{}: layer range {} starts at layer {}, which reuses the top-k of layer {}; a range must start at a "
             "layer that computes its own (attention.indexer.types)",
             path, range.str(), range.first, c.indexer_source(range.first));
    // A tied output reads the embedding: a range with the head keeps it.
    auto keep = [range](const gguf::TensorInfo& t) {
        return model::tensor_in_range(t.name, range) || (range.output && t.name == "token_embd.weight");
    };
    if (opt.stream_experts) {
        m->file_.reset();
        m->file_ = gguf::File::open(path, gguf::File::Load::Copy, [keep](const gguf::TensorInfo& t) {
            return keep(t) && !model::is_routed_expert(t.name);
        });
    } else if (opt.load == gguf::File::Load::Copy) {
        m->file_.reset();
        gguf::File::TensorFilter filter;
        if (!range.whole(c.n_layer)) filter = keep;
        m->file_ = gguf::File::open(path, gguf::File::Load::Copy, filter);
    }
    validate_tensors(*m->file_, c, range);
    m->w_ = Weights::bind(*m->file_, c, range);

    model::ModelInfo& info = m->info_;
    info.architecture = kArchitecture;
    info.name = c.name;
    info.n_vocab = c.n_vocab;
    info.n_layer = c.n_layer;
    info.hidden_size = int64_t(c.n_embd);
    info.n_embd = int64_t(c.n_embd);
    info.trained_ctx = c.context_length;
    info.range = range;
    info.metadata_hash = model::metadata_hash(*m->file_);
    m->layer_hash_.assign(c.n_layer, {});
    for (uint32_t il = range.first; il <= range.last; ++il) m->layer_hash_[il] = model::layer_hash(*m->file_, path, il);
    m->rope_ = std::make_unique<ops::Rope>(ops::RopeParams{int(c.rope_dim), c.rope_base, false});

    if (opt.stream_experts) {
        for (uint32_t il = range.first; il <= range.last; ++il)
            for (ExpertMatrix* x : {&m->w_.layers[il].gate_exps, &m->w_.layers[il].up_exps, &m->w_.layers[il].down_exps})
                x->all.data = nullptr;
        m->experts_ = std::make_shared<model::NoExperts>();
        return m;
    }
    std::vector<model::LayerExperts> experts(c.n_layer);
    for (uint32_t il = range.first; il <= range.last; ++il) {
        const LayerWeights& L = m->w_.layers[il];
        if (!L.dense) experts[il] = {L.gate_exps, L.up_exps, L.down_exps};
    }
    m->experts_ = std::make_shared<model::ResidentExperts>(std::move(experts));
    return m;
}

std::unique_ptr<model::Sequence> Model::new_sequence(const model::SequenceOptions& opt) const {
    return std::make_unique<Sequence>(*this, opt);
}

int64_t Model::sequence_bytes(const model::SequenceOptions& opt) const {
    int64_t b = 0;
    for (uint32_t il = info_.range.first; il <= info_.range.last; ++il) b += LayerState::bytes_for(cfg_, il, opt.ctx);
    return b;
}

void Model::set_expert_source(std::shared_ptr<model::ExpertSource> source) {
    if (!source) fail("set_expert_source: no source");
    std::lock_guard lock(mu_);
    experts_ = std::move(source);
}

model::ExpertFileLayout Model::expert_layout() const {
    std::vector<model::LayerExperts> layers(cfg_.n_layer);
    std::vector<uint8_t> held(cfg_.n_layer, 0);
    for (uint32_t il = info_.range.first; il <= info_.range.last; ++il) {
        const LayerWeights& L = w_.layers[il];
        if (L.dense) continue;  // the leading dense layers have no routed experts
        layers[il] = {L.gate_exps, L.up_exps, L.down_exps};
        held[il] = 1;
    }
    return model::expert_file_layout(*file_, cfg_.n_expert, cfg_.n_expert_used, layers, held);
}

std::vector<uint8_t> Model::save_state(const model::Sequence& seq, std::span<const float> logits) const {
    const auto* s = dynamic_cast<const Sequence*>(&seq);
    if (!s || &s->owner() != this) fail("save_state: a sequence of another model");
    const model::StateHeader h = model::state_header(info_, *s, logits);
    model::StateWriter w(h);
    for (uint32_t il = info_.range.first; il <= info_.range.last; ++il) {
        w.begin_layer(il, layer_hash_[il]);
        write_layer_section(w, s->layer(il), s->pos());
        w.end_layer();
    }
    return w.finish();
}

void Model::load_state(std::span<const uint8_t> bytes, model::Sequence& seq, std::vector<float>* logits) const {
    auto* target = dynamic_cast<Sequence*>(&seq);
    if (!target || &target->owner() != this) fail("load_state: a sequence of another model");
    model::StateReader r(bytes, "state");
    const model::StateHeader& h = r.header();
    // GLM has no QAT simulation: its state does not depend on the flag.
    model::check_state_header(h, info_, file_->path(), target->options(), /*check_qat=*/false);
    const int64_t pos = int64_t(h.tokens.size());
    Sequence fresh(*this, target->options());
    for (uint32_t il = info_.range.first; il <= info_.range.last; ++il) {
        if (r.begin_layer(il) != layer_hash_[il])
            r.bad(fmt::format("layer {} was saved with other weights (tensor types or shapes differ)", il));
        read_layer_section(r, il, pos, fresh.layer(il));
        r.end_layer();
    }
    r.finish();
    fresh.set_tokens(h.tokens);
    target->assign(fresh);
    if (logits) *logits = h.logits;
}

std::string describe(const gguf::File& f) {
    const GlmConfig c = GlmConfig::from_gguf(f);
    validate_tensors(f, c, model::LayerRange::all(c.n_layer));
    std::string full;
    for (uint32_t il = 0; il < c.n_layer; ++il) full += c.indexer_is_full(il) ? 'F' : 's';
    std::string out = "derived configuration (glm-dsa):\n";
    out += fmt::format("  layers {} (+{} MTP), n_embd {}, vocab {}\n", c.n_layer, c.n_nextn, c.n_embd, c.n_vocab);
    out += fmt::format("  attention: absorbed MLA, {} heads x (nope {} + rope {}), kv_lora {}, q_lora {}, v_head {}\n",
                       c.n_head, c.qk_nope_dim, c.rope_dim, c.kv_lora_rank, c.q_lora_rank, c.v_head_dim);
    out += fmt::format("  indexer: {} heads x {}, top-k {}; layers F = own top-k, s = shared: {}\n", c.indexer_heads,
                       c.indexer_dim, c.indexer_top_k, full);
    out += fmt::format("  ffn: {} dense layers x {}; then {} experts ({} used, {} shared) x {}, sigmoid gating, scale {:g}\n",
                       c.n_dense_lead, c.dense_ff, c.n_expert, c.n_expert_used, c.n_expert_shared, c.expert_ff,
                       double(c.expert_weights_scale));
    out += fmt::format("  rope base {:g}, trained context {}\n", double(c.rope_base), c.context_length);
    out += "  every tensor matches the layout: the engine can run this file\n";
    return out;
}

}  // namespace ds4::glm
