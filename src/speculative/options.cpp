#include "speculative/options.h"

#include <fmt/format.h>

#include "common/error.h"
#include "model/deepseek4/model.h"
#include "model/deepseek4/mtp.h"
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
        ->group(group);
    app.add_option("--mtp-margin", o.mtp_margin,
                   "Greedy drafts stop at one whose top-1 minus top-2 logit is below F "
                   "(default 3; 0 = never)")
        ->check(CLI::NonNegativeNumber)
        ->group(group);
}

std::string flag_error(const SpecOptions& o) {
    (void)o;
    return "";
}

namespace {

class MtpSpeculation final : public Speculation {
public:
    MtpSpeculation(std::unique_ptr<deepseek4::MtpHead> head, const SpecOptions& o) : head_(std::move(head)), o_(o) {
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
    std::unique_ptr<deepseek4::MtpHead> head_;
    SpecOptions o_;
};

}  // namespace

std::unique_ptr<Speculation> Speculation::open(model::Model& model, const SpecOptions& o) {
    if (o.mtp.empty()) return nullptr;
    auto* trunk = dynamic_cast<deepseek4::Model*>(&model);
    if (!trunk)
        fail("--mtp {}: speculative decoding needs a DeepSeek V4 model held whole in this process "
             "(not a pipeline coordinator)", o.mtp);
    return std::make_unique<MtpSpeculation>(deepseek4::MtpHead::open(*trunk, o.mtp), o);
}

}  // namespace ds4::speculative
