// IQ2_XXS: the byte layout of spec/ARCHITECTURE.md §2.5, dot kernels (scalar against the exact sum,
// SIMD against scalar) and the reference quantizer's properties. Agreement with ggml itself is
// in tests/oracle/quant_iq2_xxs_oracle_test.cpp.
#include <gtest/gtest.h>

#include "quant/activation/activation.h"
#include "quant/iq2_xxs/iq2_xxs.h"
#include "quant/iq2_xxs/iq2_xxs_grid.h"
#include "quant/iq2_xxs/iq2_xxs_vbmi.h"
#include "support/kiq_test_util.h"

namespace ds4::kiq_test {
namespace {

constexpr TensorType kType = TensorType::IQ2_XXS;
const std::initializer_list<int> kF16 = {0};  // d

void set_group(quant::BlockIQ2_XXS* b, int g, uint32_t idx, uint32_t aux) {
    std::memcpy(b->qs + 4 * g, &idx, 4);
    std::memcpy(b->qs + 4 * g + 2, &aux, 4);
}

TEST(IQ2XXS, DequantizeFollowsSpecLayout) {
    quant::BlockIQ2_XXS b{};
    b.d = f32_to_f16(1.0f);
    // group 2: chunk 0 uses codebook point 1 (magnitudes 43,8,8,8,8,8,8,8), chunks 1-3 point 0
    // (all 8); chunk 0 sign field 0b0000001 has odd parity, so values 0 and 7 are negative;
    // scale l = 3: db = (0.5 + 3) / 4.
    ASSERT_EQ(quant::kIq2xxsGrid[1], 0x080808080808082bull);
    set_group(&b, 2, 0x00000001u, (3u << 28) | 1u);
    float y[256];
    quant::dequantize_row(kType, &b, y, 256);
    const float db = 0.875f;
    for (int i = 0; i < 256; ++i) {
        float want = 1.f;  // other groups: point 0, no signs, l = 0 -> 0.5/4 * 8
        if (i / 32 == 2) want = db * 8;
        if (i == 64) want = -db * 43;
        if (i == 71) want = -db * 8;
        EXPECT_EQ(y[i], want) << "value " << i;
    }
}

TEST(IQ2XXS, SignMaskHasEvenParity) {
    for (uint32_t f = 0; f < 128; ++f) {
        const uint8_t m = quant::iq2xxs_sign_mask(f);
        EXPECT_EQ(m & 127, int(f));
        EXPECT_EQ(std::popcount(unsigned(m)) % 2, 0) << f;
        EXPECT_EQ(quant::iq2xxs_sign_mask(f | 0xffffff80u), m);  // higher bits ignored
    }
}

// The few-row VBMI path (one to five activations: decode's IQ2_XXS products) makes each value
// as u = 43 + w by one vpermb of an index built from the code planes and a reordered sign
// mask: every codebook point with every sign field must give 43 + its signed value, in every
// position of a pair (512 pairs hold the 256 x 128 combinations, each point once per field).
TEST(IQ2XXS, VbmiFewRowValuesCoverEveryPointAndSignField) {
    if (!quant::iq2xxs_vbmi_active()) GTEST_SKIP() << "no AVX512-VBMI";
    for (int q = 0; q < 512; ++q) {
        quant::BlockIQ2_XXS pair[2]{};
        for (int h = 0; h < 2; ++h)
            for (int g = 0; g < 8; ++g) {
                uint8_t idx[4];
                uint32_t aux = uint32_t(q % 16) << 28;  // scales: any, not read by the values
                for (int k = 0; k < 4; ++k) {
                    const int c = 64 * q + 32 * h + 4 * g + k;
                    idx[k] = uint8_t(c % 256);
                    aux |= uint32_t(c / 256) << (7 * k);
                }
                std::memcpy(pair[h].qs + 4 * g, idx, 4);
                std::memcpy(pair[h].qs + 4 * g + 2, &aux, 4);
            }
        uint8_t u[8][64];
        quant::iq2xxs_few_values_vbmi(pair, u);
        for (int i = 0; i < 64; ++i) {
            const int c = 64 * q + i, point = c % 256;
            const uint8_t signs = quant::iq2xxs_sign_mask(uint32_t(c / 256));
            for (int s = 0; s < 8; ++s) {
                const int m = int((quant::kIq2xxsGrid[point] >> (8 * s)) & 255);
                ASSERT_EQ(int(u[s][i]), 43 + ((signs >> s) & 1 ? -m : m))
                    << "point " << point << " field " << c / 256 << " value " << s << " byte " << i;
            }
        }
    }
}

TEST(IQ2XXS, OpsTableAndDotType) { expect_ops_table(kType); }

TEST(IQ2XXS, ScalarDotEqualsExactSum) {
    std::mt19937 rng(1);
    double worst = 0;
    for (int rep = 0; rep < 50; ++rep) {
        const int64_t nb = 1 + rep % 9;
        const auto w = random_blocks(kType, nb, kF16, rng);
        const auto a = random_q8_k(nb, rng);
        const float got = quant::dot_iq2_xxs_q8_k_scalar(nb * 256, w.data(), a.data());
        const double want = dot_reference(kType, nb * 256, w.data(), a.data());
        const double mag = dot_magnitude(kType, nb * 256, w.data(), a.data());
        worst = std::max(worst, std::fabs(got - want) / mag);
    }
    EXPECT_LT(worst, 1e-6);  // float rounding of the per-block sums
    std::printf("IQ2_XXS scalar dot vs exact: max |diff|/sum|w a| %.3g\n", worst);
}

TEST(IQ2XXS, SimdKernelsEqualScalar) {
    int isas = 0;
    const double err = max_simd_error(kType, kF16, &isas);
    // Integer parts are exact; only the float accumulation order differs. Measured 1.9e-8.
    EXPECT_LT(err, 2e-7);
    std::printf("IQ2_XXS SIMD vs scalar: %d ISAs, max |diff|/sum|w a| %.3g\n", isas, err);
}

TEST(IQ2XXS, DotWithQuantizedActivationsApproximatesFloatDot) { expect_dot_approximates_float(kType); }

TEST(IQ2XXS, QuantizeRoundTripError) {
    const int64_t n = 256 * 64;
    const auto x = gaussian(n, 3);
    std::vector<quant::BlockIQ2_XXS> q(n / 256);
    quant::quantize_iq2_xxs(x.data(), q.data(), n, nullptr);
    std::vector<float> y(n);
    quant::dequantize_iq2_xxs(q.data(), y.data(), n);
    const double e = rel_rmse(x, y, nullptr);
    EXPECT_LT(e, 0.35);  // 2.06 bits per value; measured 0.327
    std::printf("IQ2_XXS gaussian relative RMSE %.4f\n", e);
}

// Given the block's d, a group's l and a chunk's stored signs, the chosen codebook point is
// the best of all 256 for the importance-weighted error; and the stored signs are those of x,
// except in a chunk with an odd number of negatives, where exactly the value of smallest
// w|x| has its sign flipped.
TEST(IQ2XXS, QuantizerChoicesAreOptimalForItsSignsAndScales) {
    const int64_t n = 256 * 32;
    const auto x = gaussian(n, 4);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(0.1f, 10.f);
    std::vector<float> imp(n);
    for (auto& v : imp) v = u(rng);
    std::vector<quant::BlockIQ2_XXS> q(n / 256);
    quant::quantize_iq2_xxs(x.data(), q.data(), n, imp.data());
    int64_t flips = 0;
    for (int64_t c = 0; c < n / 8; ++c) {
        const auto& b = q[c / 32];
        const int g = int(c % 32) / 4, k = int(c % 4);
        uint32_t idx, aux;
        std::memcpy(&idx, b.qs + 4 * g, 4);
        std::memcpy(&aux, b.qs + 4 * g + 2, 4);
        const uint8_t signs = quant::iq2xxs_sign_mask(aux >> (7 * k));
        const float* xc = x.data() + 8 * c;
        const float* wc = imp.data() + 8 * c;
        uint8_t neg = 0;
        int cheapest = 0;
        for (int j = 0; j < 8; ++j) {
            if (xc[j] < 0) neg |= uint8_t(1 << j);
            if (wc[j] * std::fabs(xc[j]) < wc[cheapest] * std::fabs(xc[cheapest])) cheapest = j;
        }
        if (std::popcount(unsigned(neg)) % 2 == 0) {
            ASSERT_EQ(signs, neg) << "chunk " << c;
        } else {
            ASSERT_EQ(signs ^ neg, 1 << cheapest) << "chunk " << c;
            ++flips;
        }
        const float db = f16_to_f32(b.d) * (0.5f + float(aux >> 28)) * 0.25f;
        auto cost = [&](int p) {
            double e = 0;
            for (int j = 0; j < 8; ++j) {
                const double m = double((quant::kIq2xxsGrid[p] >> (8 * j)) & 255);
                const double v = db * m * ((signs >> j) & 1 ? -1 : 1) - xc[j];
                e += wc[j] * v * v;
            }
            return e;
        };
        const double chosen = cost(int((idx >> (8 * k)) & 255));
        double best = INFINITY;
        for (int p = 0; p < 256; ++p) best = std::min(best, cost(p));
        ASSERT_LE(chosen, best * (1 + 1e-9) + 1e-12) << "chunk " << c;
    }
    EXPECT_GT(flips, 0);
}

TEST(IQ2XXS, ZeroAndNonFiniteInputs) {
    std::vector<float> x(512, 0.f);
    std::vector<quant::BlockIQ2_XXS> q(2);
    quant::quantize_iq2_xxs(x.data(), q.data(), 512, nullptr);
    std::vector<float> y(512);
    quant::dequantize_iq2_xxs(q.data(), y.data(), 512);
    for (float v : y) EXPECT_EQ(v, 0.f);
    x = gaussian(512, 5);
    x[3] = NAN;
    x[300] = INFINITY;
    x[301] = -INFINITY;
    std::vector<float> imp(512, 1.f);
    imp[7] = NAN;
    imp[8] = -1.f;
    quant::quantize_iq2_xxs(x.data(), q.data(), 512, imp.data());
    quant::dequantize_iq2_xxs(q.data(), y.data(), 512);
    for (float v : y) EXPECT_TRUE(std::isfinite(v));
}

TEST(IQ2XXS, ImportanceLowersErrorWhereItIsHigh) {
    const int64_t n = 256 * 64;
    const auto x = gaussian(n, 6);
    std::vector<float> imp(n);
    for (int64_t i = 0; i < n; ++i) imp[i] = i % 8 == 0 ? 1000.f : 1.f;  // a few that matter
    std::vector<quant::BlockIQ2_XXS> flat(n / 256), weighted(n / 256);
    quant::quantize_iq2_xxs(x.data(), flat.data(), n, nullptr);
    quant::quantize_iq2_xxs(x.data(), weighted.data(), n, imp.data());
    std::vector<float> yf(n), yw(n);
    quant::dequantize_iq2_xxs(flat.data(), yf.data(), n);
    quant::dequantize_iq2_xxs(weighted.data(), yw.data(), n);
    const double ef = rel_rmse(x, yf, imp.data()), ew = rel_rmse(x, yw, imp.data());
    EXPECT_LT(ew, 0.9 * ef);
    std::printf("IQ2_XXS importance-weighted error: flat %.4f, with importance %.4f\n", ef, ew);
}

}  // namespace
}  // namespace ds4::kiq_test
