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

namespace ds4::deepseek4 {
namespace {

std::array<uint8_t, 16> digest(XXH3_state_t* st) {
    const XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    std::array<uint8_t, 16> out;
    std::memcpy(out.data(), c.digest, 16);
    return out;
}

struct Hasher {
    XXH3_state_t* st = XXH3_createState();
    Hasher() { XXH3_128bits_reset(st); }
    ~Hasher() { XXH3_freeState(st); }
    void bytes(const void* p, size_t n) { XXH3_128bits_update(st, p, n); }
    void str(const std::string& s) {
        const uint64_t n = s.size();
        bytes(&n, sizeof n);
        bytes(s.data(), s.size());
    }
    template <class T>
    void pod(T v) { bytes(&v, sizeof v); }
    void scalar(const gguf::Value::Scalar& v) {
        pod(uint32_t(v.index()));
        std::visit([&](const auto& x) {
            if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::string>) str(x);
            else pod(x);
        }, v);
    }
    std::array<uint8_t, 16> done() { return digest(st); }
};

// Every metadata key but general.* (names, authors, split markers: not the model's math) and
// the range a split file records (a split file is the same model: states stay compatible).
std::array<uint8_t, 16> metadata_hash(const gguf::File& f) {
    Hasher h;
    for (const auto& [k, v] : f.metadata()) {
        if (k.rfind("general.", 0) == 0 && k != "general.architecture") continue;
        if (k == kSplitLayersKey) continue;
        h.str(k);
        h.pod(uint32_t(v.type));
        if (v.is_array()) {
            h.pod(uint32_t(v.elem_type));
            h.pod(uint64_t(v.elems.size()));
            for (const auto& e : v.elems) h.scalar(e);
        } else {
            h.scalar(v.scalar);
        }
    }
    return h.done();
}

// A Copy load of a range reads only the range's tensors: blk.N.* of its layers, the embedding
// when it starts at layer 0, the head's tensors when it ends with the output.
bool tensor_in_range(const std::string& name, const model::LayerRange& r) {
    unsigned layer = 0;
    if (std::sscanf(name.c_str(), "blk.%u.", &layer) == 1) return r.contains(layer);
    if (name.rfind("token_embd.", 0) == 0) return r.embedding();
    if (name.rfind("output", 0) == 0) return r.output;
    return true;
}

// The routed-expert tensors (SSD streaming leaves them on disk).
bool is_routed_expert(const std::string& name) {
    return name.ends_with("ffn_gate_exps.weight") || name.ends_with("ffn_up_exps.weight") ||
           name.ends_with("ffn_down_exps.weight");
}

// Until the caller sets a source, a streaming model has no experts.
class NoExperts final : public model::ExpertSource {
public:
    void prepare(uint32_t layer, std::span<const int32_t>, std::span<const int32_t>) override {
        fail("layer {}: the model was opened for SSD streaming but no expert source is set", layer);
    }
    model::ExpertWeights expert(uint32_t layer, int32_t e) const override {
        fail("layer {} expert {}: no expert source is set", layer, e);
    }
};

// Bytes [at, at + n) of a file the load did not keep in memory.
void read_exact(const std::string& path, uint64_t at, uint8_t* dst, size_t n) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
    size_t done = 0;
    while (done < n) {
        const ssize_t r = ::pread(fd, dst + done, n - done, off_t(at + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            const int e = r < 0 ? errno : 0;
            ::close(fd);
            fail("{}: read of {} bytes at byte {} failed: {}", path, n, at + done,
                 e ? std::strerror(e) : "unexpected end of file");
        }
        done += size_t(r);
    }
    ::close(fd);
}

}  // namespace

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
            return tensor_in_range(t.name, range) && !is_routed_expert(t.name);
        });
    } else if (opt.load == gguf::File::Load::Copy) {
        m->file_.reset();
        gguf::File::TensorFilter keep;
        if (!range.whole(m->cfg_.n_layer))
            keep = [range](const gguf::TensorInfo& t) { return tensor_in_range(t.name, range); };
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
    info.trained_ctx = c.context_length;
    info.range = range;
    info.metadata_hash = metadata_hash(*m->file_);
    m->layer_hash_.assign(c.n_layer, {});
    for (uint32_t il = range.first; il <= range.last; ++il) {
        Hasher h;
        const std::string prefix = fmt::format("blk.{}.", il);
        for (const gguf::TensorInfo& t : m->file_->tensors()) {
            if (t.name.rfind(prefix, 0) != 0) continue;
            h.str(t.name);
            h.pod(uint32_t(t.type));
            for (uint32_t d = 0; d < t.n_dims; ++d) h.pod(t.ne[d]);
            // A sample of the bytes (one page at each end) tells apart files of one layout
            // whose weights differ, e.g. two generator seeds.
            const size_t k = std::min<size_t>(64, t.n_bytes);
            if (m->file_->holds(t)) {
                h.bytes(m->file_->data(t), k);
                h.bytes(m->file_->data(t) + t.n_bytes - k, k);
            } else {  // a streamed expert tensor: the same bytes, from the disk
                uint8_t ends[128];
                const uint64_t at = m->file_->data_offset() + t.offset;
                read_exact(path, at, ends, k);
                read_exact(path, at + t.n_bytes - k, ends + k, k);
                h.bytes(ends, k);
                h.bytes(ends + k, k);
            }
        }
        m->layer_hash_[il] = h.done();
    }

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
        m->experts_ = std::make_shared<NoExperts>();
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
    model::ExpertFileLayout out;
    out.path = file_->path();
    out.file_size = file_->file_size();
    out.n_expert = cfg_.n_expert;
    out.n_expert_used = cfg_.n_expert_used;
    out.layers.resize(cfg_.n_layer);
    for (uint32_t il = info_.range.first; il <= info_.range.last; ++il) {
        model::ExpertFileLayout::Layer& L = out.layers[il];
        L.held = true;
        const char* names[3] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};
        const ExpertMatrix* mats[3] = {&w_.layers[il].gate_exps, &w_.layers[il].up_exps, &w_.layers[il].down_exps};
        for (int k = 0; k < 3; ++k) {
            const gguf::TensorInfo& t = file_->tensor(fmt::format("blk.{}.{}", il, names[k]));
            model::ExpertTensorFile& p = L.parts[size_t(k)];
            p.type = t.type;
            p.rows_per_expert = mats[k]->rows_per_expert;
            p.cols = mats[k]->all.cols;
            p.row_bytes = mats[k]->all.row_bytes;
            p.offset = file_->data_offset() + t.offset;
            p.expert_bytes = uint64_t(p.rows_per_expert) * p.row_bytes;
            if (p.expert_bytes * uint64_t(cfg_.n_expert) != t.n_bytes)
                fail("{}: tensor {} holds {} bytes, not {} experts of {}", out.path, t.name, t.n_bytes,
                     cfg_.n_expert, p.expert_bytes);
        }
    }
    return out;
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
