// Loading a deepseek4 GGUF (or a layer range of it) and the model's identity.
#include "model/deepseek4/model.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <type_traits>
#include <variant>

#include "common/error.h"
#include "model/deepseek4/forward.h"
#include "model/deepseek4/layout.h"
#include "model/deepseek4/sequence.h"
#include "model/deepseek4/split.h"
#include "model/file_hashes.h"

namespace ds4::deepseek4 {

Model::Model(int threads) : model::Model(threads), ws_(std::make_unique<blocks::Workspace>()) {}
Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& path, const model::OpenOptions& opt) {
    if (opt.threads < 1) fail("thread count {} must be at least 1", opt.threads);
    auto m = std::unique_ptr<Model>(new Model(opt.threads));
    // The metadata first (a mapping touches only the header's pages): it tells the range.
    m->file_ = gguf::File::open(path, gguf::File::Load::Map);
    m->cfg_ = ModelConfig::from_gguf(*m->file_);
    const model::LayerRange range = model::LayerRange::parse(opt.layers, m->cfg_.n_layer);
    if (opt.stream_experts) {
        m->file_.reset();
        m->file_ = gguf::File::open(path, gguf::File::Load::Copy, [range](const gguf::TensorInfo& t) {
            return model::tensor_in_range(t.name, range) && !model::is_routed_expert(t.name);
        });
    } else if (opt.load == gguf::File::Load::Copy) {
        m->file_.reset();
        gguf::File::TensorFilter keep;
        if (!range.whole(m->cfg_.n_layer))
            keep = [range](const gguf::TensorInfo& t) { return model::tensor_in_range(t.name, range); };
        m->file_ = gguf::File::open(path, gguf::File::Load::Copy, keep);
    }
    const ModelConfig& c = m->cfg_;
    validate_tensors(*m->file_, c, range);
    m->w_ = Weights::bind(*m->file_, c, range);

    model::ModelInfo& info = m->info_;
    info.architecture = kArchitecture;
    info.name = c.name;
    info.n_vocab = c.n_vocab;
    info.n_layer = c.n_layer;
    info.hidden_size = int64_t(c.hc_dim());
    info.n_embd = int64_t(c.n_embd);
    info.trained_ctx = c.context_length;
    info.range = range;
    info.metadata_hash = model::metadata_hash(*m->file_);
    m->layer_hash_.assign(c.n_layer, {});
    for (uint32_t il = range.first; il <= range.last; ++il) m->layer_hash_[il] = model::layer_hash(*m->file_, path, il);

    ops::RopeParams plain{int(c.rope_dim), c.rope_base, false};
    ops::RopeParams compressed{int(c.rope_dim),        c.compress_rope_base, true,
                               c.yarn_factor,          float(c.yarn_orig_ctx),
                               c.yarn_beta_fast,       c.yarn_beta_slow};
    m->rope_plain_ = std::make_unique<ops::Rope>(plain);
    m->rope_compressed_ = std::make_unique<ops::Rope>(compressed);

    if (opt.stream_experts) {
        // The matrices keep their type and shape (the MoE sublayer reads them), not the data.
        for (uint32_t il = range.first; il <= range.last; ++il) {
            LayerWeights& L = m->w_.layers[il];
            for (ExpertMatrix* x : {&L.gate_exps, &L.up_exps, &L.down_exps}) x->all.data = nullptr;
        }
        m->experts_ = std::make_shared<model::NoExperts>();
        return m;
    }
    std::vector<model::LayerExperts> experts(c.n_layer);
    for (uint32_t il = range.first; il <= range.last; ++il) {
        const LayerWeights& L = m->w_.layers[il];
        experts[il] = {L.gate_exps, L.up_exps, L.down_exps};
    }
    m->experts_ = std::make_shared<model::ResidentExperts>(std::move(experts));
    return m;
}

std::unique_ptr<model::Sequence> Model::new_sequence(const model::SequenceOptions& opt) const {
    return std::make_unique<Sequence>(*this, opt);
}

int64_t Model::sequence_bytes(const model::SequenceOptions& opt) const {
    int64_t b = 0;
    for (uint32_t il = info_.range.first; il <= info_.range.last; ++il)
        b += LayerState::bytes_for(cfg_, cfg_.compress_ratio(il), opt.ctx, std::max<int64_t>(0, opt.rewind_slack));
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
        layers[il] = {L.gate_exps, L.up_exps, L.down_exps};
        held[il] = 1;
    }
    return model::expert_file_layout(*file_, cfg_.n_expert, cfg_.n_expert_used, layers, held);
}

std::string describe(const gguf::File& f) {
    const ModelConfig c = ModelConfig::from_gguf(f);
    // A split file is checked (and runs) for the range it records.
    const auto held = split_layers(f);
    const model::LayerRange range = model::LayerRange::parse(held.value_or(""), c.n_layer);
    validate_tensors(f, c, range);
    std::string out = "derived configuration (deepseek4):\n";
    if (held)
        out += fmt::format("  split file: holds layers {} of {} ({}{}); open it with --layers {}\n",
                           range.str(), c.n_layer, range.embedding() ? "with the token embedding" : "no token embedding",
                           range.output ? ", with the output head" : ", no output head", range.str());
    out += fmt::format("  layers {}, n_embd {}, vocab {}, hc streams {} (sinkhorn {})\n", c.n_layer,
                       c.n_embd, c.n_vocab, c.hc, c.sinkhorn_iters);
    out += fmt::format("  attention: {} heads x {} (rope {}), q rank {}, output {} groups x {}, window {}\n",
                       c.n_head, c.head_dim, c.rope_dim, c.q_lora_rank, c.o_groups, c.o_lora_rank, c.window);
    out += fmt::format("  indexer: {} heads x {}, top-k {}\n", c.indexer_heads, c.indexer_dim, c.indexer_top_k);
    out += fmt::format("  moe: {} experts ({} used, {} shared) x ff {}, {} hash layers, scale {:g}\n",
                       c.n_expert, c.n_expert_used, c.n_expert_shared, c.expert_ff, c.n_hash_layers,
                       double(c.expert_weights_scale));
    std::string ratios;
    for (uint32_t r : c.compress_ratios) {
        if (!ratios.empty()) ratios += ',';
        ratios += std::to_string(r);  // two appends: g++ 12 warns (-Wrestrict) on "," + string
    }
    out += fmt::format("  compress ratios: {}\n", ratios);
    out += fmt::format("  rope base {:g}; compressed layers base {:g} + YaRN x{:g} (orig ctx {})\n",
                       double(c.rope_base), double(c.compress_rope_base), double(c.yarn_factor),
                       c.yarn_orig_ctx);
    out += held ? fmt::format("  every tensor of layers {} matches the layout: the engine can run this range\n", range.str())
                : "  every tensor matches the layout: the engine can run this file\n";
    return out;
}

}  // namespace ds4::deepseek4
