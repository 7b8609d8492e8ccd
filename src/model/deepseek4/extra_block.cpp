// Extra blocks: binding, their sequences (one LayerState each) and their evaluation through the
// trunk model.
#include "model/deepseek4/extra_block.h"

#include <vector>

#include "common/error.h"
#include "model/blocks/batch_check.h"
#include "model/deepseek4/forward.h"
#include "model/deepseek4/layout.h"
#include "model/deepseek4/sequence.h"

namespace ds4::deepseek4 {
namespace {

// A block's timeline: its one layer's state and the tokens evaluated.
class BlockSequence final : public model::Sequence {
public:
    BlockSequence(const ExtraBlock& block, model::SequenceOptions opt)
        : model::Sequence(checked(opt)), block_(&block),
          state_(block.trunk().config(), block.weights(), opt_.ctx, opt_.rewind_slack) {}

    bool can_rewind(int64_t n) const override { return state_.can_rewind(n, pos()); }
    void rewind(int64_t n) override {
        if (!can_rewind(n)) fail("cannot rewind a block sequence of {} positions to {} without evaluating again", pos(), n);
        state_.rewind(n);
        tokens_.resize(size_t(n));
    }
    void clear() override {
        state_.reset();
        tokens_.clear();
    }
    int64_t state_bytes() const override { return state_.bytes(); }
    int64_t state_bytes_used() const override { return state_.used_bytes(pos()); }
    std::unique_ptr<model::Sequence> clone() const override {
        return std::unique_ptr<model::Sequence>(new BlockSequence(*this));
    }
    void assign(const model::Sequence& other) override {
        const auto* o = dynamic_cast<const BlockSequence*>(&other);
        if (!o || o->block_ != block_ || o->opt_.ctx != opt_.ctx || o->opt_.rewind_slack != opt_.rewind_slack)
            fail("restore: the snapshot belongs to a sequence of another block or with other options");
        state_ = o->state_;
        tokens_ = o->tokens_;
        opt_.qat = o->opt_.qat;
    }

    const ExtraBlock& block() const { return *block_; }
    LayerState& state() { return state_; }
    void append_tokens(std::span<const int32_t> t) { tokens_.insert(tokens_.end(), t.begin(), t.end()); }

private:
    BlockSequence(const BlockSequence&) = default;
    static model::SequenceOptions checked(model::SequenceOptions opt) {
        if (opt.ctx <= 0) fail("context size {} must be positive", opt.ctx);
        if (opt.ctx > kMaxContext) fail("context size {} is above the engine's limit of {}", opt.ctx, kMaxContext);
        if (opt.rewind_slack < 0) opt.rewind_slack = 0;
        return opt;
    }

    const ExtraBlock* block_;
    LayerState state_;
};

// How the block's sublayers find a row span's state (LayerContext::state).
LayerState& block_state(const blocks::Rows::Span& sp, uint32_t) { return static_cast<BlockSequence*>(sp.seq)->state(); }

}  // namespace

std::unique_ptr<ExtraBlock> ExtraBlock::bind(Model& trunk, const gguf::File& file, BlockRecipe recipe) {
    const ModelConfig& c = trunk.config();
    if (recipe.as_layer >= c.n_layer)
        fail("{}: extra block {}: as_layer {} is not a trunk layer (the model has {})", file.path(), recipe.prefix,
             recipe.as_layer, c.n_layer);
    const LayerKind kind{recipe.ratio, recipe.hash};
    // Held first: the checks read tid2eid's entries.
    for (const TensorSpec& s : layer_tensor_layout(c, recipe.prefix, int(recipe.as_layer), kind))
        if (const gguf::TensorInfo* t = file.find_tensor(s.name); t && !file.holds(*t))
            fail("{}: tensor {} was not loaded (a layer-range or expert-streaming load): bind the block "
                 "from a mapping of the file", file.path(), s.name);
    validate_layer_tensors(file, c, recipe.prefix, kind, int(recipe.as_layer));
    auto b = std::unique_ptr<ExtraBlock>(new ExtraBlock());
    b->trunk_ = &trunk;
    b->w_ = bind_layer(file, c, recipe.prefix, int(recipe.as_layer), kind);
    b->recipe_ = std::move(recipe);
    // The executor asks its source for layer `as_layer`'s experts (the spec's layer id).
    std::vector<model::LayerExperts> experts(size_t(b->recipe_.as_layer) + 1);
    experts.back() = {b->w_.gate_exps, b->w_.up_exps, b->w_.down_exps};
    b->experts_ = std::make_unique<model::ResidentExperts>(std::move(experts));
    return b;
}

std::unique_ptr<ExtraBlock> ExtraBlock::open(Model& trunk, const std::string& path, BlockRecipe recipe) {
    std::unique_ptr<gguf::File> f = gguf::File::open(path, gguf::File::Load::Map);
    std::unique_ptr<ExtraBlock> b = bind(trunk, *f, std::move(recipe));
    b->own_file_ = std::move(f);
    return b;
}

ExtraBlock::~ExtraBlock() = default;

std::unique_ptr<model::Sequence> ExtraBlock::new_sequence(const model::SequenceOptions& opt) const {
    return std::make_unique<BlockSequence>(*this, opt);
}

int64_t ExtraBlock::sequence_bytes(const model::SequenceOptions& opt) const {
    return LayerState::bytes_for(trunk_->config(), recipe_.ratio, opt.ctx, std::max<int64_t>(0, opt.rewind_slack));
}

void ExtraBlock::check(model::Batch b) const {
    blocks::check_batch(b, trunk_->config().n_vocab, true, [this](const model::Sequence& s) {
        const auto* seq = dynamic_cast<const BlockSequence*>(&s);
        return seq && &seq->block() == this;
    });
    for (const model::BatchItem& it : b)
        if (it.want != model::Logits::None) fail("batch: an extra block has no output head: no logits can be wanted");
}

void Model::eval_block(const ExtraBlock& block, model::Batch b, float* X) {
    if (&block.trunk() != this) fail("eval_block: the block was bound to another model");
    block.check(b);
    std::lock_guard lock(mu_);
    block_unlocked(block, b, X);
}

void Model::block_unlocked(const ExtraBlock& block, model::Batch b, float* X) {
    const Rows rows(b);
    const LayerContext ctx{cfg_, *this, pool(), *ws_, rows, block.experts(), block_state, /*trunk=*/false};
    attention_sublayer(ctx, block.weights(), X);
    moe_sublayer(ctx, block.weights(), X);
    for (const model::BatchItem& it : b) static_cast<BlockSequence*>(it.seq)->append_tokens(it.tokens);
}

}  // namespace ds4::deepseek4
