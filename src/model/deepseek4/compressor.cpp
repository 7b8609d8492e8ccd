#include "model/deepseek4/compressor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "ops/norm.h"
#include "ops/qat.h"

namespace ds4::deepseek4 {

void CompressorState::init(const CompressorWeights& w, int64_t slack) {
    ratio_ = w.ratio;
    width_ = w.width;
    coff_ = w.coff;
    row_ = int64_t(coff_) * width_;
    slots_ = int64_t(coff_ == 2 ? 2 * ratio_ : ratio_) + std::max<int64_t>(0, slack);
    kv_.assign(size_t(slots_ * row_), 0.0f);
    score_.assign(kv_.size(), 0.0f);
    next_ = 0;
}

void CompressorState::reset() { next_ = valid_from_ = 0; }

int64_t CompressorState::bytes_for(int ratio, int width, int64_t slack) {
    const int coff = ratio == 4 ? 2 : 1;
    const int64_t slots = int64_t(coff == 2 ? 2 * ratio : ratio) + std::max<int64_t>(0, slack);
    return int64_t(sizeof(float)) * 2 * slots * coff * width;
}

void CompressorState::load(int64_t next, const float* kv, const float* score) {
    if (next < 0) fail("internal: compressor state at position {}", next);
    next_ = next;
    const int64_t first = first_needed(next);
    valid_from_ = first;
    if (next - first > slots_) fail("internal: compressor ring of {} slots for {} open positions", slots_, next - first);
    for (int64_t p = first; p < next; ++p) {
        std::memcpy(&kv_[size_t(p % slots_) * row_], kv + (p - first) * row_, sizeof(float) * row_);
        std::memcpy(&score_[size_t(p % slots_) * row_], score + (p - first) * row_, sizeof(float) * row_);
    }
}

int64_t CompressorState::first_needed(int64_t n) const {
    const int64_t open = n / ratio_ * ratio_;  // first position of the window n falls in
    return std::max<int64_t>(0, coff_ == 2 ? open - ratio_ : open);
}

bool CompressorState::can_rewind(int64_t n) const {
    return n >= 0 && n <= next_ &&
           (n == 0 || (first_needed(n) >= next_ - slots_ && first_needed(n) >= valid_from_));
}

void CompressorState::rewind(int64_t n) {
    if (!can_rewind(n)) fail("internal: compressor cannot rewind from {} to {}", next_, n);
    next_ = n;
}

bool CompressorState::push(int64_t p, const float* k, const float* g, float* pooled) {
    if (p != next_) fail("internal: compressor fed position {}, expected {}", p, next_);
    std::memcpy(&kv_[size_t(p % slots_) * row_], k, sizeof(float) * row_);
    std::memcpy(&score_[size_t(p % slots_) * row_], g, sizeof(float) * row_);
    next_ = p + 1;
    if ((p + 1) % ratio_ != 0) return false;

    // Candidates per channel j, in position order: with overlap, the previous window's tokens
    // (first halves; absent before position 0), then this window's (second halves); otherwise
    // this window's single half.
    const int64_t own = p + 1 - ratio_;
    const int64_t from = coff_ == 2 ? std::max<int64_t>(0, own - ratio_) : own;
    for (int j = 0; j < width_; ++j) {
        auto channel = [&](int64_t q) { return (coff_ == 2 && q >= own ? width_ : 0) + j; };
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t q = from; q <= p; ++q) mx = std::max(mx, score(q)[channel(q)]);
        float sum = 0.0f, acc = 0.0f;
        for (int64_t q = from; q <= p; ++q) {
            const float e = std::exp(score(q)[channel(q)] - mx);
            sum += e;
            acc += e * kv(q)[channel(q)];
        }
        pooled[j] = acc / sum;
    }
    return true;
}

void finish_compressed_row(float* row, const CompressorWeights& w, const ops::Rope& rope,
                           int64_t first_pos, float eps, int rope_dim, CompressedRowQat qat) {
    ops::rms_norm(row, w.width, w.norm, eps, row);
    rope.apply(row, 1, w.width, first_pos);
    switch (qat) {
        case CompressedRowQat::None: break;
        case CompressedRowQat::Fp8Nope: ops::fp8_roundtrip(row, w.width - rope_dim); break;
        case CompressedRowQat::HadamardFp4:
            ops::hadamard(row, w.width);
            ops::fp4_roundtrip(row, w.width);
            break;
    }
}

}  // namespace ds4::deepseek4
