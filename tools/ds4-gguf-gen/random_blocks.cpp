#include "random_blocks.h"

#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "common/half.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace ds4::gen {

namespace {

using quant::BlockIQ2_XXS;
using quant::BlockQ2_K;
using quant::BlockQ4_K;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::kQK_K;

void fill_random(Rng& rng, void* p, size_t n) {
    auto* b = static_cast<uint8_t*>(p);
    while (n >= 8) {
        const uint64_t v = rng.next();
        std::memcpy(b, &v, 8);
        b += 8, n -= 8;
    }
    if (n) {
        const uint64_t v = rng.next();
        std::memcpy(b, &v, n);
    }
}

// Q4_K / Q5_K scale bytes: random 6-bit (scale, min) pairs packed as in spec/ARCHITECTURE.md
// §2.5 with min_j = scale_j for every sub-block: bytes 4..7 repeat bytes 0..3, bytes 8..11
// repeat their nibble.
void random_scales_min_equal(Rng& rng, uint8_t* scales) {
    fill_random(rng, scales, 12);
    for (int j = 0; j < 4; ++j) scales[j + 4] = scales[j];
    for (int j = 8; j < 12; ++j) scales[j] = uint8_t((scales[j] & 15) | (scales[j] & 15) << 4);
}

// One block with scale d (f16-rounded by the caller's choice of d).
void random_block(TensorType t, Rng& rng, float d, uint8_t* out) {
    switch (t) {
        case TensorType::IQ2_XXS: {
            BlockIQ2_XXS b;
            fill_random(rng, b.qs, sizeof b.qs);
            b.d = f32_to_f16(d);
            std::memcpy(out, &b, sizeof b);
            return;
        }
        case TensorType::Q2_K: {
            BlockQ2_K b;
            fill_random(rng, b.qs, sizeof b.qs);
            fill_random(rng, b.scales, sizeof b.scales);
            for (uint8_t& s : b.scales) s = uint8_t((s & 15) | (s & 15) << 4);  // min = scale
            b.d = f32_to_f16(d);
            b.dmin = f32_to_f16(1.5f * d);
            std::memcpy(out, &b, sizeof b);
            return;
        }
        case TensorType::Q4_K: {
            BlockQ4_K b;
            fill_random(rng, b.qs, sizeof b.qs);
            random_scales_min_equal(rng, b.scales);
            b.d = f32_to_f16(d);
            b.dmin = f32_to_f16(7.5f * d);
            std::memcpy(out, &b, sizeof b);
            return;
        }
        case TensorType::Q5_K: {
            BlockQ5_K b;
            fill_random(rng, b.qs, sizeof b.qs);
            fill_random(rng, b.qh, sizeof b.qh);
            random_scales_min_equal(rng, b.scales);
            b.d = f32_to_f16(d);
            b.dmin = f32_to_f16(15.5f * d);
            std::memcpy(out, &b, sizeof b);
            return;
        }
        case TensorType::Q6_K: {
            BlockQ6_K b;
            fill_random(rng, b.ql, sizeof b.ql);
            fill_random(rng, b.qh, sizeof b.qh);
            fill_random(rng, b.scales, sizeof b.scales);
            for (int8_t& s : b.scales) s = s == -128 ? int8_t(-127) : s;  // symmetric: mean 0
            b.d = f32_to_f16(d);
            std::memcpy(out, &b, sizeof b);
            return;
        }
        default: fail("no random blocks for {}", tensor_type_name(t));
    }
}

// RMS of the dequantized values of random blocks with d = 1 (fixed sample, so constant).
float unit_rms(TensorType t) {
    constexpr int kBlocks = 512;
    const size_t bb = row_bytes(t, kQK_K);
    std::vector<uint8_t> blocks(bb * kBlocks);
    Rng rng(0x5eed);
    for (int i = 0; i < kBlocks; ++i) random_block(t, rng, 1.0f, blocks.data() + bb * size_t(i));
    std::vector<float> v(size_t(kBlocks) * kQK_K);
    quant::dequantize_row(t, blocks.data(), v.data(), int64_t(v.size()));
    double ss = 0;
    for (float x : v) ss += double(x) * x;
    return float(std::sqrt(ss / double(v.size())));
}

}  // namespace

constexpr TensorType kRandomTypes[] = {TensorType::IQ2_XXS, TensorType::Q2_K, TensorType::Q4_K,
                                       TensorType::Q5_K, TensorType::Q6_K};

bool has_random_blocks(TensorType t) {
    for (TensorType r : kRandomTypes)
        if (r == t) return true;
    return false;
}

void random_blocks_row(TensorType t, Rng& rng, int64_t n, float rms, uint8_t* out) {
    static const auto kUnit = [] {
        std::array<float, std::size(kRandomTypes)> u{};
        for (size_t i = 0; i < u.size(); ++i) u[i] = unit_rms(kRandomTypes[i]);
        return u;
    }();
    size_t which = 0;
    while (which < std::size(kRandomTypes) && kRandomTypes[which] != t) ++which;
    if (which == std::size(kRandomTypes)) fail("no random blocks for {}", tensor_type_name(t));
    const float d = rms / kUnit[which];
    const size_t bb = row_bytes(t, kQK_K);
    if (n % kQK_K != 0) fail("row of {} values is not a multiple of {}", n, kQK_K);
    for (int64_t b = 0; b < n / kQK_K; ++b) random_block(t, rng, d, out + bb * size_t(b));
}

}  // namespace ds4::gen
