#include "speculative/options.h"

#include <fmt/format.h>

#include <optional>

#include "common/error.h"
#include "model/deepseek4/model.h"
#include "model/deepseek4/mtp.h"
#include "model/deepseek4/dspark.h"
#include "model/glm/model.h"
#include "model/glm/mtp.h"
#include "pipeline/pipeline_model.h"
#include "speculative/dspark_drafter.h"
#include "speculative/mtp_drafter.h"

namespace ds4::speculative {

void add_flags(CLI::App& app, SpecOptions& o, const std::string& group) {
    app.add_option("--mtp,--mtp-model", o.mtp,
                   "Speculative decoding with the MTP head in FILE: upstream's MTP support GGUF "
                   "(mtp.0.*) or a GGUF with llama.cpp's blk.N.nextn.* head (the model file itself "
                   "when it embeds one)")
        ->type_name("FILE")
        ->group(group);
    app.add_option("--mtp-draft", o.mtp_draft,
                   "Tokens verified per decode step with --mtp: the pending token plus N-1 drafts "
                   "(1 = off; default 2, at most 16)")
        ->check(CLI::Range(1, 16))
        ->type_name("N")
        ->group(group);
    app.add_option("--mtp-margin", o.mtp_margin,
                   "Greedy drafts stop at one whose top-1 minus top-2 logit is below F "
                   "(default 3; 0 = never)")
        ->check(CLI::NonNegativeNumber)
        ->type_name("F")
        ->group(group);
    app.add_flag("--dspark", o.dspark,
                 "The --mtp FILE is a DSpark support GGUF: a block drafter proposing up to its "
                 "block size - 1 tokens per step (--mtp-draft does not apply)")
        ->group(group);
    app.add_option("--dspark-confidence", o.dspark_confidence,
                   "With --dspark: cut each block at its first row whose confidence is below F "
                   "(default 0.7; 0 = whole blocks)")
        ->check(CLI::Range(0.0, 1.0))
        ->type_name("F")
        ->group(group);
    app.add_flag("--dspark-strict", o.dspark_strict,
                 "With --dspark: load the drafter but decode target-only (the control run)")
        ->group(group);
    app.add_flag("--glm-mtp", o.glm_mtp,
                 "GLM 5.2: speculative decoding with the MTP block embedded in the model file "
                 "(blk.N.nextn.*); --mtp-draft and --mtp-margin apply")
        ->group(group);
}

std::string flag_error(const SpecOptions& o) {
    if (o.glm_mtp && !o.mtp.empty()) return "--glm-mtp uses the model's own MTP block: drop --mtp FILE";
    if (o.dspark && o.mtp.empty()) return "--dspark needs --mtp FILE (the DSpark support GGUF)";
    if (!o.dspark && o.dspark_strict) return "--dspark-strict needs --dspark";
    return "";
}

namespace {

// What a drafter head runs with (mtp.h check_drafter_trunk): the model itself, or on a pipeline
// coordinator its own layers (0:K, with the token embedding) and the trunk's output head bound
// from a mapping of its model file (which must hold the head's tensors).
struct Trunk {
    deepseek4::Model* model = nullptr;
    std::unique_ptr<gguf::File> file;  // the mapping the output head is bound from, when not model's
    std::optional<deepseek4::HeadWeights> output;
    const deepseek4::HeadWeights* head() const { return output ? &*output : nullptr; }
};

Trunk drafter_trunk(model::Model& model, const SpecOptions& o) {
    Trunk t;
    auto* pm = dynamic_cast<pipeline::PipelineModel*>(&model);
    t.model = dynamic_cast<deepseek4::Model*>(pm ? &pm->local() : &model);
    if (!t.model)
        fail("--mtp {}: speculative decoding needs a DeepSeek V4 model (this one is '{}')", o.mtp,
             model.info().architecture);
    if (!pm || t.model->info().range.output) return t;
    try {
        const gguf::File* f = &t.model->file();
        if (!f->holds(f->tensor("output.weight"))) {
            t.file = gguf::File::open(f->path(), gguf::File::Load::Map);
            f = t.file.get();
        }
        t.output = deepseek4::output_head(*f, t.model->config());
    } catch (const Error& e) {
        fail("--mtp {} on a pipeline coordinator: the drafter runs here and needs the output head's tensors in "
             "the coordinator's -m file: {}", o.mtp, e.what());
    }
    return t;
}

class MtpSpeculation final : public Speculation {
public:
    MtpSpeculation(Trunk t, const SpecOptions& o) : file_(std::move(t.file)), o_(o) {
        head_ = deepseek4::MtpHead::open(*t.model, o.mtp, t.head());
        max_draft_ = o.mtp_draft - 1;
    }
    std::unique_ptr<engine::Drafter> new_drafter(const model::SequenceOptions& seq) override {
        return std::make_unique<MtpDrafter>(*head_, seq, MtpDrafterOptions{.margin = o_.mtp_margin});
    }
    std::string describe() const override {
        return fmt::format("MTP head {} ({}), {} draft{} per step, margin {:g}", head_->path(),
                           head_->layout() == deepseek4::MtpHead::Layout::Support ? "upstream's support layout"
                                                                                 : "llama.cpp's nextn layout",
                           max_draft_, max_draft_ == 1 ? "" : "s", o_.mtp_margin);
    }
    int64_t drafter_bytes(const model::SequenceOptions& seq) const override { return head_->sequence_bytes(seq); }

private:
    std::unique_ptr<gguf::File> file_;  // before head_: it outlives the head bound to it
    std::unique_ptr<deepseek4::MtpHead> head_;
    SpecOptions o_;
};

class DsparkSpeculation final : public Speculation {
public:
    DsparkSpeculation(Trunk t, const SpecOptions& o) : file_(std::move(t.file)), o_(o) {
        head_ = deepseek4::DsparkHead::open(*t.model, o.mtp, t.head());
        max_draft_ = o.dspark_strict ? 0 : int(head_->info().block_size) - 1;
    }
    std::unique_ptr<engine::Drafter> new_drafter(const model::SequenceOptions& seq) override {
        return std::make_unique<DsparkDrafter>(*head_, DsparkDrafterOptions{.threshold = o_.dspark_confidence, .qat = seq.qat});
    }
    std::string describe() const override {
        const deepseek4::DsparkInfo& i = head_->info();
        return fmt::format("DSpark {} ({} stages, block {}, Markov rank {}), {} per step, confidence {:g}{}", o_.mtp,
                           i.stages, i.block_size, i.markov_rank,
                           o_.dspark_strict ? "no drafts" : fmt::format("up to {} drafts", max_draft_),
                           o_.dspark_confidence, o_.dspark_strict ? " (strict: target-only control)" : "");
    }
    int64_t drafter_bytes(const model::SequenceOptions&) const override { return 0; }

private:
    std::unique_ptr<gguf::File> file_;  // before head_: it outlives the head bound to it
    std::unique_ptr<deepseek4::DsparkHead> head_;
    SpecOptions o_;
};

// GLM 5.2's embedded MTP block (glm/mtp.h) through the family-neutral MTP drafter.
class GlmMtpSpeculation final : public Speculation {
public:
    GlmMtpSpeculation(model::Model& model, const SpecOptions& o) : o_(o) {
        auto* glm = dynamic_cast<glm::Model*>(&model);
        if (!glm)
            fail("--glm-mtp: the model is '{}', not GLM 5.2 (glm-dsa); DeepSeek V4 takes --mtp FILE{}",
                 model.info().architecture,
                 dynamic_cast<pipeline::PipelineModel*>(&model) ? " (a pipeline coordinator runs no GLM drafter)" : "");
        head_ = glm::MtpHead::embedded(*glm);
        if (!head_) fail("--glm-mtp: {} has no MTP block (blk.{}.nextn.*)", glm->file().path(), glm->config().n_layer);
        view_ = std::make_unique<GlmMtpView>(*head_);
        max_draft_ = o.mtp_draft - 1;
    }
    std::unique_ptr<engine::Drafter> new_drafter(const model::SequenceOptions& seq) override {
        return std::make_unique<MtpDrafter>(*view_, seq, MtpDrafterOptions{.margin = o_.mtp_margin});
    }
    std::string describe() const override {
        return fmt::format("GLM MTP block of {}, {} draft{} per step, margin {:g}", head_->trunk().file().path(),
                           max_draft_, max_draft_ == 1 ? "" : "s", o_.mtp_margin);
    }
    int64_t drafter_bytes(const model::SequenceOptions& seq) const override { return head_->sequence_bytes(seq); }

private:
    std::unique_ptr<glm::MtpHead> head_;
    std::unique_ptr<GlmMtpView> view_;
    SpecOptions o_;
};

}  // namespace

std::unique_ptr<Speculation> Speculation::open(model::Model& model, const SpecOptions& o) {
    if (const std::string e = flag_error(o); !e.empty()) fail("{}", e);
    if (o.glm_mtp) return std::make_unique<GlmMtpSpeculation>(model, o);
    if (o.mtp.empty()) return nullptr;
    if (model.info().architecture == glm::kArchitecture)
        fail("--mtp {}: GLM 5.2 drafts with the MTP block of its own file: use --glm-mtp", o.mtp);
    Trunk t = drafter_trunk(model, o);
    if (o.dspark) return std::make_unique<DsparkSpeculation>(std::move(t), o);
    return std::make_unique<MtpSpeculation>(std::move(t), o);
}

}  // namespace ds4::speculative
