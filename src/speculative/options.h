// Speculative decoding's flags and start-up, once for every front end (ds4, ds4-server,
// ds4-bench; docs/SPECULATIVE.md): --mtp FILE opens a drafter head for the loaded model, and
// each sequence a run keeps gets a drafter of its own that mirrors it.
//
//   speculative::add_flags(app, o.spec);                     // at parse time
//   auto spec = speculative::Speculation::open(*model, o.spec);   // nullptr without --mtp
//   auto d = spec->new_drafter(seq.options());  engine.set_drafter(d.get());
//   engine.generate({..., .max_draft = spec->max_draft()}, ...);
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "engine/generator.h"
#include "model/model.h"

namespace ds4::speculative {

struct SpecOptions {
    std::string mtp;             // --mtp FILE (--mtp-model FILE): the drafter's support GGUF
    int mtp_draft = 2;           // --mtp-draft N: tokens verified per step (1 = off, at most 16)
    float mtp_margin = 3.0f;     // --mtp-margin F (greedy: stop drafting below this top-1/top-2 margin)
    bool dspark = false;         // --dspark: FILE is a DSpark support GGUF (block drafter)
    float dspark_confidence = 0.7f;  // --dspark-confidence F: cut a block at the first row below F (0: whole)
    bool dspark_strict = false;  // --dspark-strict: load the drafter, decode target-only (the control)
    bool glm_mtp = false;        // --glm-mtp: GLM 5.2's MTP block embedded in the model file
};

void add_flags(CLI::App& app, SpecOptions& o, const std::string& group = "Speculative decoding");
// The combinations the flags alone cannot check; "" when fine.
std::string flag_error(const SpecOptions& o);

class Speculation {
public:
    virtual ~Speculation() = default;
    // The drafter head of o.mtp (DeepSeek V4) or of the model's embedded block (--glm-mtp, GLM
    // 5.2) for `model`, or nullptr when neither is asked for. Throws ds4::Error naming the file
    // (a model of the other family, a file without a head, ...).
    static std::unique_ptr<Speculation> open(model::Model& model, const SpecOptions& o);

    // A drafter for a sequence with these options (attach it before its prompt is evaluated).
    virtual std::unique_ptr<engine::Drafter> new_drafter(const model::SequenceOptions& seq) = 0;
    // Drafts per step (--mtp-draft - 1).
    int max_draft() const { return max_draft_; }
    // "MTP head mtp.gguf (upstream's support layout), 1 draft per step, margin 3" for the log.
    virtual std::string describe() const = 0;
    // Bytes of state a drafter allocates for such a sequence (the memory check).
    virtual int64_t drafter_bytes(const model::SequenceOptions& seq) const = 0;

protected:
    int max_draft_ = 0;
};

}  // namespace ds4::speculative
