#include "engine/generator.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "model/state_file.h"

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
        if (drafter_) {
            const int64_t from = needs_.tail > 0 ? std::max(pos, n - needs_.tail) : pos;
            if (from < end) ask_draft_outputs(from - pos, end - from);
        }
        last_decode_ = false;
    } else if (pending_ >= 0) {
        rows_.assign(1, pending_);
        Draft d = drafts(pending_);
        rows_.insert(rows_.end(), d.tokens.begin(), d.tokens.end());
        draft_probs_ = std::move(d.probs);
        logits_.resize(rows_.size() * size_t(V));
        out_.tokens = rows_;
        out_.want = rows_.size() == 1 ? model::Logits::Last : model::Logits::All;
        out_.logits = logits_.data();
        if (drafter_) ask_draft_outputs(0, int64_t(rows_.size()));
        base_ = pos;
        last_decode_ = true;
    } else {
        return out_;  // nothing to evaluate: ready() or stopped
    }
    in_flight_ = true;
    return out_;
}

// The drafter's outputs of rows from..from+rows-1 of the rows in flight.
void Generator::ask_draft_outputs(int64_t from, int64_t rows) {
    out_.hidden_from = from;
    const size_t H = size_t(cfg_.hidden_size);
    if (needs_.hidden) {
        hidden_.resize(size_t(rows) * H);
        out_.hidden_want = model::Logits::All;
        out_.hidden = hidden_.data();
    }
    if (!needs_.capture.empty()) {
        captured_.resize(needs_.capture.size() * size_t(rows) * H);
        out_.capture = needs_.capture;
        out_.captured = captured_.data();
    }
}

// Tells the drafter the sequence holds `tokens` (the first `keep` of `rows` rows whose outputs
// were asked for) from position pos on.
void Generator::commit_draft_outputs(int64_t pos, std::span<const int32_t> tokens, int64_t rows, int64_t keep) {
    const size_t H = size_t(cfg_.hidden_size), kept = size_t(keep) * H;
    // Captures are [layer][rows][H]: close the gaps the rejected rows leave.
    for (size_t c = 1; c < needs_.capture.size() && keep < rows; ++c)
        std::memmove(captured_.data() + c * kept, captured_.data() + c * size_t(rows) * H, kept * sizeof(float));
    drafter_->commit(pos, tokens.first(size_t(keep)), needs_.hidden ? hidden_.data() : nullptr,
                         needs_.capture.empty() ? nullptr : captured_.data());
}

Draft Generator::drafts(int32_t next) {
    if (!drafter_ || opt_.max_draft <= 0) return {};
    if (backoff_wait_ > 0) {
        --backoff_wait_;
        ++usage_.backed_off;
        return {};
    }
    const int64_t pos = seq_.pos();
    // Rows at pos .. pos + k must fit the context, a rejection must be an O(1) rewind, and no
    // more drafts than the limit leaves room for: each accepted draft lets one more token out.
    int64_t k = opt_.max_draft;
    // Backing off, a step probes with one draft (the cheapest multi-row step) until one is
    // accepted again.
    if (backoff_len_ > 0) k = 1;
    k = std::min(k, seq_.options().ctx - 1 - pos);
    k = std::min(k, seq_.options().rewind_slack);
    if (opt_.max_tokens != INT64_MAX) k = std::min(k, opt_.max_tokens - usage_.emitted - 1);
    if (k <= 0) return {};
    Draft d = drafter_->propose(seq_.tokens(), next, int(k));
    if (int64_t(d.tokens.size()) > k) d.tokens.resize(size_t(k));
    for (size_t i = 0; i < d.tokens.size(); ++i)
        if (d.tokens[i] < 0 || d.tokens[i] >= cfg_.n_vocab) {
            d.tokens.resize(i);  // a drafter's bad id ends its proposal
            break;
        }
    if (!d.probs.empty()) {
        // A distribution per kept token, or none at all (then the tokens are point masses).
        const size_t want = d.tokens.size() * size_t(cfg_.n_vocab);
        if (d.probs.size() < want) fail("drafter: {} probabilities for {} drafts of a vocabulary of {}",
                                         d.probs.size(), d.tokens.size(), cfg_.n_vocab);
        d.probs.resize(want);
    }
    return d;
}

void Generator::evaluated() {
    if (!in_flight_) fail("generator: evaluated() without rows");
    in_flight_ = false;
    if (!last_decode_) {
        usage_.evaluated += int64_t(out_.tokens.size());
        if (out_.hidden || out_.captured) {
            const int64_t rows = int64_t(out_.tokens.size()) - out_.hidden_from;
            commit_draft_outputs(seq_.pos() - rows, out_.tokens.subspan(size_t(out_.hidden_from)), rows, rows);
        }
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
    if (drafter_) drafter_->begin(opt.sampling);
    forced_at_ = 0;
    pending_ = -1;
    usage_.emitted = usage_.drafted = usage_.accepted = usage_.steps = usage_.backed_off = 0;
    backoff_len_ = backoff_wait_ = 0;
}

// After a verified step that accepted `accepted` of its drafts.
void Generator::back_off(int64_t accepted) {
    constexpr int64_t kLongest = 32;
    if (!opt_.draft_backoff || accepted > 0) {
        backoff_len_ = 0;
        return;
    }
    backoff_len_ = backoff_len_ == 0 ? 1 : std::min(2 * backoff_len_, kLongest);
    backoff_wait_ = backoff_len_;
}

void Generator::set_drafter(Drafter* d) {
    if (in_flight_) fail("generator: set_drafter() while rows are being evaluated");
    const DraftNeeds needs = d ? d->needs() : DraftNeeds{};
    if ((needs.hidden || !needs.capture.empty()) && cfg_.hidden_size <= 0)
        fail("generator: the drafter reads hidden states but the generator was not told their size");
    drafter_ = d;
    needs_ = needs;
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

std::vector<uint8_t> Generator::save_state(const model::Model& m) const {
    if (in_flight_) fail("generator: save_state() while rows are being evaluated");
    std::vector<uint8_t> state = m.save_state(seq_, seq_.pos() > 0 ? ready_logits() : std::span<const float>());
    const std::string kind = drafter_ ? drafter_->state_kind() : "";
    if (kind.empty()) return state;
    return model::with_drafter_section(state, {kind, drafter_->save_state()});
}

bool Generator::load_state(const model::Model& m, std::span<const uint8_t> bytes) {
    if (in_flight_) fail("generator: load_state() while rows are being evaluated");
    std::vector<float> logits;
    m.load_state(bytes, seq_, &logits);
    set_logits(std::move(logits));
    return drafter_ && restore_drafter(*drafter_, bytes, seq_.tokens());
}

bool restore_drafter(Drafter& d, std::span<const uint8_t> state, std::span<const int32_t> tokens) {
    const std::optional<model::DrafterSection> s = model::drafter_section(state);
    const bool mine = s && !d.state_kind().empty() && s->kind == d.state_kind();
    return d.restore(mine ? std::span<const uint8_t>(s->bytes) : std::span<const uint8_t>(), tokens);
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
    ban(row);
    if (opt_.greedy && opt_.greedy()) return sampling::argmax(row);
    return sampler_->sample(row);
}

void Generator::ban(std::span<const float> row) const {
    if (!opt_.ban_eos) return;
    // Only the benchmarks ask for it; the row is not needed afterwards.
    float* p = const_cast<float*>(row.data());
    if (cfg_.eos >= 0) p[cfg_.eos] = -std::numeric_limits<float>::infinity();
    for (int32_t id : cfg_.stop_ids)
        if (id >= 0 && id < cfg_.n_vocab) p[id] = -std::numeric_limits<float>::infinity();
}

// Row j's token when draft j+1 came with the distribution q it was drawn from: the draft with
// probability min(1, p(d)/q(d)), else a draw from the residual norm(max(0, p - q)).
int32_t Generator::verify_sample(int64_t j, std::optional<StopReason>& stop) {
    if (opt_.forced || sampler_->params().temperature <= 0 || (opt_.greedy && opt_.greedy()))
        return pick(row_logits(j), stop);
    const int64_t V = cfg_.n_vocab;
    ban(row_logits(j));
    std::vector<sampling::Candidate> p = sampler_->candidates(row_logits(j));
    const int32_t d = rows_[size_t(j + 1)];
    const float* q = draft_probs_.data() + j * V;
    double pd = 0;
    for (const auto& c : p)
        if (c.id == d) pd = c.p;
    if (q[d] > 0 && sampler_->uniform() * double(q[d]) < pd) return d;
    double sum = 0;
    for (auto& c : p) sum += c.p = std::max(0.0f, c.p - q[c.id]);
    std::erase_if(p, [](const sampling::Candidate& c) { return c.p <= 0; });
    if (p.empty() || sum <= 0) return sampler_->draw(sampler_->candidates(row_logits(j)));
    for (auto& c : p) c.p = float(c.p / sum);
    return sampler_->draw(p);
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
    const int64_t ctx = seq_.options().ctx;
    pending_ = -1;
    std::optional<StopReason> stop;
    for (;;) {
        if (usage_.emitted >= opt_.max_tokens) { stop = StopReason::Length; break; }
        if (cancelled()) { stop = StopReason::Cancelled; break; }
        const bool speculative = verifying && j + 1 < logits_rows_ && !draft_probs_.empty();
        const int32_t id = speculative ? verify_sample(j, stop) : pick(row_logits(j), stop);
        if (stop) break;
        if (ends_reply(id)) { stop = StopReason::Eos; break; }
        ++usage_.emitted;
        token_row_ = j;
        const bool go_on = on_token(id);
        token_row_ = -1;
        if (!go_on) { stop = StopReason::Caller; break; }
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
    if (verifying && rows_.size() > 1) back_off(j);
    if (verifying && drafter_)
        commit_draft_outputs(logits_pos_ - 1, rows_, int64_t(rows_.size()), j + 1);  // rows 0..j kept
    return stop;
}

}  // namespace ds4::engine
