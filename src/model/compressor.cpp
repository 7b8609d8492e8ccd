#include "model/compressor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ops/norm.h"
#include "ops/qat.h"

namespace ds4::model {

void CompressorState::init(const CompressorWeights& w) {
    ratio_ = w.ratio;
    width_ = w.width;
    coff_ = w.coff;
    const int slots = coff_ == 2 ? 2 * ratio_ : ratio_;
    kv_.assign(size_t(slots) * coff_ * width_, 0.0f);
    score_.assign(kv_.size(), -std::numeric_limits<float>::infinity());
}

void CompressorState::reset() {
    std::fill(kv_.begin(), kv_.end(), 0.0f);
    std::fill(score_.begin(), score_.end(), -std::numeric_limits<float>::infinity());
}

bool CompressorState::push(int64_t p, const float* k, const float* g, float* pooled) {
    const int row = coff_ * width_;
    const int slot = coff_ == 2 ? ratio_ + int(p % ratio_) : int(p % ratio_);
    std::memcpy(&kv_[size_t(slot) * row], k, sizeof(float) * row);
    std::memcpy(&score_[size_t(slot) * row], g, sizeof(float) * row);
    if ((p + 1) % ratio_ != 0) return false;

    // Candidates per channel j: (slot, channel offset). Overlap: previous window's first half,
    // then own window's second half; otherwise the window's single half.
    const int n_cand = coff_ == 2 ? 2 * ratio_ : ratio_;
    for (int j = 0; j < width_; ++j) {
        float mx = -std::numeric_limits<float>::infinity();
        for (int c = 0; c < n_cand; ++c) {
            const int off = (coff_ == 2 && c >= ratio_) ? width_ : 0;
            mx = std::max(mx, score_[size_t(c) * row + off + j]);
        }
        float sum = 0.0f, acc = 0.0f;
        for (int c = 0; c < n_cand; ++c) {
            const int off = (coff_ == 2 && c >= ratio_) ? width_ : 0;
            const float s = score_[size_t(c) * row + off + j];
            if (s == -std::numeric_limits<float>::infinity()) continue;  // absent (window -1)
            const float e = std::exp(s - mx);
            sum += e;
            acc += e * kv_[size_t(c) * row + off + j];
        }
        pooled[j] = acc / sum;
    }
    if (coff_ == 2) {  // the current window becomes the previous one
        std::memcpy(kv_.data(), &kv_[size_t(ratio_) * row], sizeof(float) * ratio_ * row);
        std::memcpy(score_.data(), &score_[size_t(ratio_) * row], sizeof(float) * ratio_ * row);
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

}  // namespace ds4::model
