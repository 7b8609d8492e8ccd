#include "speculative/mtp_drafter.h"

#include <algorithm>
#include <cstring>

namespace ds4::speculative {

MtpDrafter::MtpDrafter(deepseek4::MtpHead& head, const model::SequenceOptions& seq, MtpDrafterOptions opt)
    : own_view_(std::make_unique<Deepseek4MtpView>(head)), head_(own_view_.get()), opt_(opt) {
    init(seq);
}

MtpDrafter::MtpDrafter(MtpHeadView& head, const model::SequenceOptions& seq, MtpDrafterOptions opt)
    : head_(&head), opt_(opt) {
    init(seq);
}

void MtpDrafter::init(const model::SequenceOptions& seq) {
    width_ = head_->width();
    vocab_ = head_->vocab();
    window_ = head_->window(seq.ctx);
    seq_ = head_->new_sequence(seq);
}

void MtpDrafter::begin(const sampling::SamplerParams& p) {
    sampling_ = p;
    sampler_.reset();
    // Drafts at temperature > 0 are drawn from the head's own distribution under the same
    // settings (a stream of their own) and verified by exact speculative sampling.
    if (p.temperature > 0) {
        sampling::SamplerParams own = p;
        own.seed = p.seed ^ 0x6d74702d64726166ULL;
        sampler_.emplace(own);
    }
}

void MtpDrafter::restart(int64_t at) {
    seq_->clear();
    off_ = at;
    ++stats_.restarts;
}

void MtpDrafter::commit(int64_t pos, std::span<const int32_t> tokens, const float* hidden, const float*) {
    if (!hidden || tokens.empty()) return;
    // The held rows: continued, cut back to pos, or started again at pos after a gap.
    if (pos < hpos_ || pos > held_end()) {
        hpos_ = pos;
        htok_.clear();
        hbuf_.clear();
    } else {
        htok_.resize(size_t(pos - hpos_));
        hbuf_.resize(htok_.size() * size_t(width_));
    }
    htok_.insert(htok_.end(), tokens.begin(), tokens.end());
    const size_t at = hbuf_.size();
    hbuf_.resize(at + tokens.size() * size_t(width_));
    head_->trunk_rows(hidden, int64_t(tokens.size()), hbuf_.data() + at);
    // The head's row q pairs h_{q-1} with x_q: rows before pos stand, and row pos too when its
    // token is the one committed there (the first draft row of the last proposal).
    if (head_end() > pos) {
        int64_t keep = pos - off_;
        if (keep >= 0 && keep < seq_->pos() && seq_->tokens()[size_t(keep)] == tokens[0]) ++keep;
        if (keep > 0 && seq_->can_rewind(keep)) seq_->rewind(keep);
        else seq_->clear();
    }
    // Only the last window + 1 rows can feed a draft.
    const int64_t excess = int64_t(htok_.size()) - (window_ + 1);
    if (excess > 0) {
        htok_.erase(htok_.begin(), htok_.begin() + excess);
        hbuf_.erase(hbuf_.begin(), hbuf_.begin() + excess * width_);
        hpos_ += excess;
    }
}

namespace {

constexpr uint32_t kStateVersion = 1;

void put(std::vector<uint8_t>& out, const void* p, size_t n) {
    const size_t at = out.size();
    out.resize(at + n);
    if (n) std::memcpy(out.data() + at, p, n);
}

}  // namespace

// version u32, width u64, first position u64, rows n u64, tokens i32[n], hidden f32[n][width].
std::vector<uint8_t> MtpDrafter::save_state() const {
    std::vector<uint8_t> out;
    const uint64_t n = htok_.size();
    put(out, &kStateVersion, 4);
    put(out, &width_, 8);
    put(out, &hpos_, 8);
    put(out, &n, 8);
    put(out, htok_.data(), 4 * htok_.size());
    put(out, hbuf_.data(), sizeof(float) * hbuf_.size());
    return out;
}

bool MtpDrafter::restore(std::span<const uint8_t> bytes, std::span<const int32_t> tokens) {
    hpos_ = 0;
    htok_.clear();
    hbuf_.clear();
    seq_->clear();  // the head's rows are made again from the held ones at the next proposal
    off_ = 0;
    uint32_t version = 0;
    int64_t width = 0, pos = 0;
    uint64_t n = 0;
    constexpr size_t kFixed = 4 + 3 * 8;
    if (bytes.size() < kFixed) return false;
    std::memcpy(&version, bytes.data(), 4);
    std::memcpy(&width, bytes.data() + 4, 8);
    std::memcpy(&pos, bytes.data() + 12, 8);
    std::memcpy(&n, bytes.data() + 20, 8);
    if (version != kStateVersion || width != width_ || n == 0 || n > uint64_t(window_ + 1) || pos < 0 ||
        uint64_t(pos) + n != tokens.size() || bytes.size() - kFixed != n * (4 + 4 * uint64_t(width)))
        return false;
    std::vector<int32_t> t(n);
    std::memcpy(t.data(), bytes.data() + kFixed, 4 * n);
    if (!std::equal(t.begin(), t.end(), tokens.begin() + pos)) return false;
    hpos_ = pos;
    htok_ = std::move(t);
    hbuf_.resize(size_t(n * uint64_t(width)));
    std::memcpy(hbuf_.data(), bytes.data() + kFixed + 4 * n, sizeof(float) * hbuf_.size());
    return true;
}

int32_t MtpDrafter::choose(std::span<const float> logits, engine::Draft& d, bool& stop) {
    if (!sampler_) {
        int32_t best = sampling::argmax(logits), second = -1;
        for (int64_t v = 0; v < vocab_; ++v)
            if (v != best && (second < 0 || logits[size_t(v)] > logits[size_t(second)])) second = int32_t(v);
        if (opt_.margin > 0 && second >= 0 && logits[size_t(best)] - logits[size_t(second)] < opt_.margin) {
            stop = true;
            ++stats_.cut;
        }
        return best;
    }
    const std::vector<sampling::Candidate> c = sampler_->candidates(logits);
    const int32_t id = sampler_->draw(c);
    const size_t at = d.probs.size();
    d.probs.resize(at + size_t(vocab_), 0.0f);
    for (const auto& cand : c) d.probs[at + size_t(cand.id)] = cand.p;
    return id;
}

engine::Draft MtpDrafter::propose(std::span<const int32_t> history, int32_t next, int max) {
    const int64_t end = int64_t(history.size());
    if (max <= 0 || htok_.empty() || held_end() != end) return {};
    // Rows from..end: the head's window before the first draft row (h_{end-1}, next).
    const int64_t from = std::max(end - window_ + 1, hpos_ + 1);
    // A row at `end` left by an earlier proposal (nothing committed since) is made again: its
    // token may differ, and its outputs were not kept.
    if (head_end() > end && end - off_ > 0 && seq_->can_rewind(end - off_)) seq_->rewind(end - off_);
    if (head_end() < from || head_end() > end) restart(from);
    std::vector<int32_t> toks;
    for (int64_t q = head_end(); q < end; ++q) toks.push_back(htok_[size_t(q - hpos_)]);
    toks.push_back(next);
    const float* h = hbuf_.data() + (head_end() - 1 - hpos_) * width_;
    std::vector<float> logits(static_cast<size_t>(vocab_)), y(static_cast<size_t>(width_)), y_next(static_cast<size_t>(width_));
    head_->eval(*seq_, toks, h, y.data(), logits.data(), model::Logits::Last);
    stats_.head_rows += int64_t(toks.size());

    engine::Draft d;
    bool stop = false;
    for (int i = 0;; ++i) {
        const int32_t t = choose(logits, d, stop);
        if (stop) break;
        d.tokens.push_back(t);
        if (i + 1 >= max) break;
        const int32_t row[1] = {t};
        head_->eval(*seq_, row, y.data(), y_next.data(), logits.data(), model::Logits::Last);
        ++stats_.head_rows;
        y.swap(y_next);
    }
    // Keep the rows through `end`: the recursive ones paired drafts with the head's own output.
    seq_->rewind(end + 1 - off_);
    if (!d.tokens.empty()) {
        ++stats_.proposals;
        stats_.drafted += int64_t(d.tokens.size());
    }
    return d;
}

}  // namespace ds4::speculative
