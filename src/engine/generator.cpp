#include "engine/generator.h"

#include <algorithm>
#include <limits>

#include "common/error.h"

namespace ds4::engine {

const char* to_string(StopReason r) {
    switch (r) {
        case StopReason::Eos: return "eos";
        case StopReason::Length: return "length";
        case StopReason::ContextFull: return "context_full";
        case StopReason::Cancelled: return "cancelled";
        case StopReason::Caller: return "caller";
        case StopReason::ForcedEnd: return "forced_end";
    }
    return "?";
}

Generator::Generator(model::Sequence& seq, GeneratorConfig cfg) : seq_(seq), cfg_(cfg) {
    if (cfg_.n_vocab <= 0) fail("generator: vocabulary size {} must be positive", cfg_.n_vocab);
}

int64_t Generator::set_prompt(std::vector<int32_t> prompt) {
    if (in_flight_) fail("generator: set_prompt() while rows are being evaluated");
    const int64_t n = int64_t(prompt.size()), ctx = seq_.options().ctx;
    if (n == 0) fail("nothing to evaluate: the prompt is empty");
    if (n >= ctx)
        fail("context exceeded: the prompt is {} tokens but the context holds {} (including the "
             "reply)", n, ctx);
    for (int32_t t : prompt)
        if (t < 0 || t >= cfg_.n_vocab) fail("token id {} out of range [0, {})", t, cfg_.n_vocab);

    pending_ = -1;
    unverified_ = false;
    int64_t keep = seq_.common_prefix(prompt);
    if (!(keep == n && seq_.pos() == n && !ready_logits().empty())) {
        keep = std::min(keep, n - 1);  // the last position is evaluated again for its logits
        if (keep < seq_.pos()) {
            // Within the rings' slack a rewind is O(1); farther back the prefix is evaluated
            // again with the prompt, in pieces like any prefill.
            if (seq_.can_rewind(keep)) {
                seq_.rewind(keep);
            } else {
                seq_.clear();
                keep = 0;
            }
        }
    }
    prompt_ = std::move(prompt);
    usage_ = GeneratorUsage{.prompt = n, .reused = keep};
    return keep;
}

Generator::Rows Generator::next(int64_t max_prompt, int64_t limit) {
    if (in_flight_) fail("generator: next() before the previous rows were evaluated");
    const int64_t pos = seq_.pos(), n = int64_t(prompt_.size()), V = cfg_.n_vocab;
    out_ = Rows{};
    if (pos < n) {
        int64_t end = std::min(n, pos + std::max<int64_t>(1, max_prompt));
        if (limit > pos && limit < end) end = limit;
        out_.tokens = std::span<const int32_t>(prompt_.data() + pos, size_t(end - pos));
        if (end == n || end == limit) {
            logits_.resize(size_t(V));
            out_.want = model::Logits::Last;
            out_.logits = logits_.data();
        }
        last_decode_ = false;
    } else if (pending_ >= 0) {
        rows_.assign(1, pending_);
        const std::vector<int32_t> d = drafts(pending_);
        rows_.insert(rows_.end(), d.begin(), d.end());
        logits_.resize(rows_.size() * size_t(V));
        out_.tokens = rows_;
        out_.want = rows_.size() == 1 ? model::Logits::Last : model::Logits::All;
        out_.logits = logits_.data();
        base_ = pos;
        last_decode_ = true;
    } else {
        return out_;  // nothing to evaluate: ready() or stopped
    }
    in_flight_ = true;
    return out_;
}

std::vector<int32_t> Generator::drafts(int32_t next) const {
    if (!opt_.drafter || opt_.max_draft <= 0) return {};
    const int64_t pos = seq_.pos();
    // Rows at pos .. pos + k must fit the context, a rejection must be an O(1) rewind, and no
    // more drafts than the limit leaves room for: each accepted draft lets one more token out.
    int64_t k = opt_.max_draft;
    k = std::min(k, seq_.options().ctx - 1 - pos);
    k = std::min(k, seq_.options().rewind_slack);
    if (opt_.max_tokens != INT64_MAX) k = std::min(k, opt_.max_tokens - usage_.emitted - 1);
    if (k <= 0) return {};
    std::vector<int32_t> d = opt_.drafter->propose(seq_.tokens(), next, int(k));
    if (int64_t(d.size()) > k) d.resize(size_t(k));
    for (size_t i = 0; i < d.size(); ++i)
        if (d[i] < 0 || d[i] >= cfg_.n_vocab) {
            d.resize(i);  // a drafter's bad id ends its proposal
            break;
        }
    return d;
}

void Generator::evaluated() {
    if (!in_flight_) fail("generator: evaluated() without rows");
    in_flight_ = false;
    if (!last_decode_) {
        usage_.evaluated += int64_t(out_.tokens.size());
        if (out_.want != model::Logits::None) {
            logits_rows_ = 1;
            logits_pos_ = seq_.pos();
        }
        return;
    }
    ++usage_.steps;
    usage_.drafted += int64_t(rows_.size()) - 1;
    logits_rows_ = int64_t(rows_.size());
    logits_pos_ = base_ + 1;  // row 0 follows the pending token
    unverified_ = true;
}

void Generator::begin(const GenerateOptions& opt) {
    if (in_flight_ || unverified_) fail("generator: begin() in the middle of a step");
    opt_ = opt;
    sampler_.emplace(opt.sampling);
    forced_at_ = 0;
    pending_ = -1;
    usage_.emitted = usage_.drafted = usage_.accepted = usage_.steps = 0;
}

void Generator::choose(int32_t id) {
    if (!ready()) fail("generator: choose() needs ready logits");
    if (id < 0 || id >= cfg_.n_vocab) fail("token id {} out of range [0, {})", id, cfg_.n_vocab);
    pending_ = id;
    ++usage_.emitted;
}

bool Generator::ready() const {
    return pending_ < 0 && seq_.pos() >= int64_t(prompt_.size()) && !ready_logits().empty();
}

std::span<const float> Generator::ready_logits() const {
    // Before verification only a step without drafts has logits that surely follow the history.
    if (in_flight_ || (unverified_ && logits_rows_ > 1) || logits_pos_ < 0 || logits_rows_ <= 0) return {};
    const int64_t row = seq_.pos() - logits_pos_;  // after a verification: the accepted row
    if (row < 0 || row >= logits_rows_) return {};
    return std::span<const float>(logits_).subspan(size_t(row * cfg_.n_vocab), size_t(cfg_.n_vocab));
}

void Generator::set_logits(std::vector<float> logits) {
    if (in_flight_) fail("generator: set_logits() while rows are being evaluated");
    prompt_ = seq_.tokens();
    pending_ = -1;
    unverified_ = false;
    if (logits.empty()) {
        logits_pos_ = -1;
        logits_rows_ = 0;
        return;
    }
    if (int64_t(logits.size()) != cfg_.n_vocab)
        fail("generator: {} logits for a vocabulary of {}", logits.size(), cfg_.n_vocab);
    logits_ = std::move(logits);
    logits_rows_ = 1;
    logits_pos_ = seq_.pos();
}

void Generator::reset() {
    in_flight_ = unverified_ = false;
    pending_ = -1;
    logits_pos_ = -1;
    logits_rows_ = 0;
    prompt_.clear();
}

bool Generator::cancelled() const { return opt_.cancel && opt_.cancel->load(std::memory_order_relaxed); }

int32_t Generator::pick(std::span<const float> row, std::optional<StopReason>& stop) {
    if (opt_.forced) {
        if (forced_at_ == opt_.forced->size()) {
            stop = StopReason::ForcedEnd;
            return -1;
        }
        return (*opt_.forced)[forced_at_++];
    }
    if (opt_.ban_eos && cfg_.eos >= 0) {
        // Only the benchmarks ask for it; the row is not needed afterwards.
        float* p = const_cast<float*>(row.data());
        p[cfg_.eos] = -std::numeric_limits<float>::infinity();
    }
    return sampler_->sample(row);
}

// Rows 0..j of the last step are accepted: the sequence keeps them (and row j's logits stay
// at hand for the next sample or a saved state).
void Generator::settle(int64_t j) {
    const int64_t keep = logits_pos_ + j;
    if (seq_.pos() > keep) seq_.rewind(keep);
}

std::optional<StopReason> Generator::advance(const std::function<bool(int32_t)>& on_token) {
    if (!sampler_) fail("generator: advance() before begin()");
    const bool verifying = unverified_;
    if (!verifying && !ready()) fail("generator: advance() needs ready logits");
    unverified_ = false;
    // The row the next sample comes from: the last one when logits came from a prompt piece or
    // a loaded state, row 0 of a generation step being verified.
    int64_t j = verifying ? 0 : seq_.pos() - logits_pos_;
    const int64_t ctx = seq_.options().ctx, V = cfg_.n_vocab;
    pending_ = -1;
    std::optional<StopReason> stop;
    for (;;) {
        if (usage_.emitted >= opt_.max_tokens) { stop = StopReason::Length; break; }
        if (cancelled()) { stop = StopReason::Cancelled; break; }
        const int32_t id = pick(std::span<const float>(logits_.data() + j * V, size_t(V)), stop);
        if (stop) break;
        if (id == cfg_.eos) { stop = StopReason::Eos; break; }
        ++usage_.emitted;
        if (!on_token(id)) { stop = StopReason::Caller; break; }
        if (usage_.emitted >= opt_.max_tokens) { stop = StopReason::Length; break; }
        // The emitted token needs a position, and the one after it room to be emitted.
        if (logits_pos_ + j + 1 >= ctx) { stop = StopReason::ContextFull; break; }
        if (verifying && j + 1 < logits_rows_ && rows_[size_t(j + 1)] == id) {
            ++j;  // the draft was right: its row's logits follow the accepted history
            ++usage_.accepted;
            continue;
        }
        pending_ = id;
        break;
    }
    settle(j);
    return stop;
}

}  // namespace ds4::engine
