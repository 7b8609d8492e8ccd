// Helpers shared by the Q2_K, Q4_K and IQ2_XXS unit tests: random blocks, random Q8_K
// activations, and the "every SIMD kernel equals the scalar reference" check.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/half.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace ds4::kiq_test {

// A random f16 in +-[2^-6, 2^3]: finite, normal, and far from overflow in any kernel.
inline uint16_t random_scale_f16(std::mt19937& rng) {
    const uint16_t exp = uint16_t(9 + rng() % 10);  // biased exponent 9..18
    return uint16_t(((rng() & 1) << 15) | (exp << 10) | (rng() & 0x3ff));
}

// nblocks blocks of t: random bytes, then random_scale_f16 in the f16 fields at f16_offsets.
inline std::vector<uint8_t> random_blocks(TensorType t, int64_t nblocks,
                                          std::initializer_list<int> f16_offsets,
                                          std::mt19937& rng) {
    const size_t bsize = row_bytes(t, 256);
    std::vector<uint8_t> out(static_cast<size_t>(nblocks) * bsize);
    for (auto& b : out) b = uint8_t(rng());
    for (int64_t i = 0; i < nblocks; ++i)
        for (int off : f16_offsets) {
            const uint16_t h = random_scale_f16(rng);
            std::memcpy(out.data() + size_t(i) * bsize + size_t(off), &h, 2);
        }
    return out;
}

// Q8_K activation blocks with codes in [-127, 127] (the range quantize_q8_k produces),
// consistent bsums and a random scale.
inline std::vector<quant::BlockQ8_K> random_q8_k(int64_t nblocks, std::mt19937& rng) {
    std::vector<quant::BlockQ8_K> out(static_cast<size_t>(nblocks));
    std::uniform_real_distribution<float> scale(1e-3f, 1e-1f);
    for (auto& b : out) {
        b.d = scale(rng) * (rng() & 1 ? -1.f : 1.f);
        for (auto& q : b.qs) q = int8_t(int(rng() % 255) - 127);
        for (int g = 0; g < 16; ++g) {
            int s = 0;
            for (int i = 0; i < 16; ++i) s += b.qs[16 * g + i];
            b.bsums[g] = int16_t(s);
        }
    }
    return out;
}

// sum_i |w_i a_i| for a weight row of t and Q8_K activations, from the dequantized weights.
inline double dot_magnitude(TensorType t, int64_t n, const void* w,
                            const quant::BlockQ8_K* act) {
    std::vector<float> wf(static_cast<size_t>(n));
    quant::dequantize_row(t, w, wf.data(), n);
    double m = 0;
    for (int64_t i = 0; i < n; ++i)
        m += std::fabs(double(wf[size_t(i)]) * act[i / 256].d * act[i / 256].qs[i % 256]);
    return m;
}

// Exact sum_i w_i a_i in double from the dequantized weights and activation codes.
inline double dot_reference(TensorType t, int64_t n, const void* w,
                            const quant::BlockQ8_K* act) {
    std::vector<float> wf(static_cast<size_t>(n));
    quant::dequantize_row(t, w, wf.data(), n);
    double s = 0;
    for (int64_t i = 0; i < n; ++i)
        s += double(wf[size_t(i)]) * act[i / 256].d * act[i / 256].qs[i % 256];
    return s;
}

// Every supported SIMD kernel of t against its scalar kernel on random rows of several
// lengths; returns the largest |simd - scalar| / sum|w a| and the number of ISAs compared.
inline double max_simd_error(TensorType t, std::initializer_list<int> f16_offsets,
                             int* isas_checked) {
    std::mt19937 rng(1234);
    const quant::FormatOps* ops = quant::format_ops(t);
    double worst = 0;
    *isas_checked = 0;
    for (int isa = 1; isa < quant::kIsaCount; ++isa) {
        if (!quant::isa_supported(quant::Isa(isa))) continue;
        EXPECT_NE(ops->dot[isa], nullptr) << quant::isa_name(quant::Isa(isa));
        if (!ops->dot[isa]) continue;
        ++*isas_checked;
        for (int64_t nb : {1, 2, 3, 7, 16, 64}) {
            for (int rep = 0; rep < 40; ++rep) {
                const auto w = random_blocks(t, nb, f16_offsets, rng);
                const auto a = random_q8_k(nb, rng);
                const float ref = ops->dot[0](nb * 256, w.data(), a.data());
                const float got = ops->dot[isa](nb * 256, w.data(), a.data());
                const double mag = dot_magnitude(t, nb * 256, w.data(), a.data());
                worst = std::max(worst, std::fabs(double(got) - ref) / mag);
            }
        }
    }
    return worst;
}

// f16 scales at the edges of the format: zeros of both signs, the smallest and largest
// denormals, the largest finite magnitudes, one.
inline constexpr uint16_t kEdgeF16[] = {0x0000, 0x8000, 0x0001, 0x03ff, 0x8200, 0x7bff, 0xfbff, 0x3c00};

// random_blocks whose f16 fields are edge values (kEdgeF16, each field its own pick) in every
// block; then every SIMD kernel of t against its scalar kernel: returns the largest
// |simd - scalar| / sum|w a|, and requires both exactly equal where that sum is 0 (all-zero
// scales) and both finite.
inline double max_simd_error_edge_scales(TensorType t, std::initializer_list<int> f16_offsets) {
    std::mt19937 rng(4321);
    const quant::FormatOps* ops = quant::format_ops(t);
    const size_t bsize = row_bytes(t, 256);
    double worst = 0;
    for (int isa = 1; isa < quant::kIsaCount; ++isa) {
        if (!quant::isa_supported(quant::Isa(isa))) continue;
        for (int64_t nb : {1, 2, 3, 8}) {
            for (int rep = 0; rep < 64; ++rep) {
                auto w = random_blocks(t, nb, f16_offsets, rng);
                for (int64_t i = 0; i < nb; ++i)
                    for (int off : f16_offsets) {
                        const uint16_t h = kEdgeF16[(rep + i + rng()) % std::size(kEdgeF16)];
                        std::memcpy(w.data() + size_t(i) * bsize + size_t(off), &h, 2);
                    }
                const auto a = random_q8_k(nb, rng);
                const float ref = ops->dot[0](nb * 256, w.data(), a.data());
                const float got = ops->dot[isa](nb * 256, w.data(), a.data());
                EXPECT_TRUE(std::isfinite(ref) && std::isfinite(got)) << quant::isa_name(quant::Isa(isa));
                const double mag = dot_magnitude(t, nb * 256, w.data(), a.data());
                if (mag == 0) EXPECT_EQ(got, ref) << quant::isa_name(quant::Isa(isa));
                else worst = std::max(worst, std::fabs(double(got) - ref) / mag);
            }
        }
    }
    return worst;
}

// The format table entry: dot type Q8_K and a kernel for every ISA.
inline void expect_ops_table(TensorType kType) {
    const quant::FormatOps* ops = quant::format_ops(kType);
    ASSERT_NE(ops, nullptr);
    EXPECT_EQ(ops->type, kType);
    EXPECT_EQ(ops->dot_type, TensorType::Q8_K);
    EXPECT_NE(ops->dot[0], nullptr);
    EXPECT_NE(ops->dot[1], nullptr);
    EXPECT_NE(ops->dot[2], nullptr);
}

// Quantized weights x Q8_K activations on every supported ISA stay within 1% of sum|w x|
// of the float dot of the dequantized weights.
inline void expect_dot_approximates_float(TensorType kType) {
    std::mt19937 rng(2);
    std::normal_distribution<float> g(0.f, 1.f);
    const int64_t n = 4096;
    std::vector<float> w(n), x(n);
    for (auto& v : w) v = g(rng);
    for (auto& v : x) v = g(rng);
    std::vector<uint8_t> wq(row_bytes(kType, n)), xq(row_bytes(TensorType::Q8_K, n));
    quant::quantize_row(kType, w.data(), wq.data(), n);
    quant::quantize_activation(TensorType::Q8_K, x.data(), xq.data(), n);
    std::vector<float> wd(n);
    quant::dequantize_row(kType, wq.data(), wd.data(), n);
    double exact = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) exact += double(wd[i]) * x[i], mag += std::fabs(wd[i] * x[i]);
    for (int isa = 0; isa < quant::kIsaCount; ++isa) {
        if (!quant::isa_supported(quant::Isa(isa))) continue;
        const float got = quant::dot_kernel(kType, quant::Isa(isa))(n, wq.data(), xq.data());
        EXPECT_NEAR(got, exact, 0.01 * mag) << quant::isa_name(quant::Isa(isa));
    }
}

inline std::vector<float> gaussian(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = g(rng);
    return x;
}

// sqrt(sum w (y-x)^2 / sum w x^2), w = 1 when null.
inline double rel_rmse(const std::vector<float>& x, const std::vector<float>& y, const float* w) {
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double wi = w ? w[i] : 1.0;
        num += wi * (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
        den += wi * double(x[i]) * x[i];
    }
    return std::sqrt(num / den);
}

}  // namespace ds4::kiq_test
