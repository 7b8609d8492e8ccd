// The multi-row dot kernels (quant.h multi_dot_kernel): every (row, activation) value is
// bit-identical to dot_kernel on that row and activation, for every format, every ISA this CPU
// has, odd row and activation counts and row lengths that reach every tail path of the
// single-row kernels.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <random>
#include <vector>

#include "common/half.h"
#include "quant/iq2_xxs/iq2_xxs_vbmi.h"
#include "quant/q8_0/q8_0.h"
#include "quant/quant.h"

namespace ds4::quant {
namespace {

// A random f16 in +-[2^-6, 2^3] (finite, normal).
uint16_t random_f16(std::mt19937& rng) {
    const uint16_t exp = uint16_t(9 + rng() % 10);
    return uint16_t(((rng() & 1) << 15) | (exp << 10) | (rng() & 0x3ff));
}

// Random bytes in every code field, sane values in the scale fields.
std::vector<uint8_t> random_weights(TensorType t, int64_t rows, int64_t n, std::mt19937& rng) {
    const size_t rb = row_bytes(t, n);
    std::vector<uint8_t> w(rb * size_t(rows));
    for (auto& b : w) b = uint8_t(rng());
    auto put16 = [&](size_t off, uint16_t h) { std::memcpy(w.data() + off, &h, 2); };
    const auto info = *tensor_type_info(t);
    const size_t blocks = w.size() / info.block_bytes;
    for (size_t b = 0; b < blocks; ++b) {
        const size_t o = b * info.block_bytes;
        switch (t) {
            case TensorType::F16: put16(o, random_f16(rng)); break;
            case TensorType::Q8_0:
            case TensorType::Q4_0:
            case TensorType::IQ2_XXS: put16(o, random_f16(rng)); break;
            case TensorType::Q4_K:
            case TensorType::Q5_K: put16(o, random_f16(rng)), put16(o + 2, random_f16(rng)); break;
            case TensorType::Q6_K: put16(o + 208, random_f16(rng)); break;
            case TensorType::Q2_K: put16(o + 80, random_f16(rng)), put16(o + 82, random_f16(rng)); break;
            case TensorType::MXFP4: w[o] = uint8_t(110 + rng() % 30); break;
            default: break;
        }
    }
    return w;
}

struct Case {
    TensorType type;
    std::vector<int64_t> lengths;  // values per row
};

// Lengths reach the block loops' tails: Q8_0/MXFP4 groups of 8 blocks + pairs + a single block;
// Q4_0 block pairs and a last odd block;
// Q8_0 rows of several 4096-column segments; F16 64-value steps, 16-value steps and masked / scalar tails.
const std::vector<Case>& cases() {
    static const std::vector<Case> c = {
        {TensorType::Q8_0, {32, 64, 96, 256, 288, 320, 544, 4096, 8192, 8736}},
        {TensorType::MXFP4, {32, 64, 96, 256, 288, 320, 544, 4096}},
        {TensorType::Q4_0, {32, 64, 96, 256, 288, 544, 4096}},
        {TensorType::Q2_K, {256, 512, 768, 2048}},
        {TensorType::Q4_K, {256, 512, 768, 2048}},
        {TensorType::Q5_K, {256, 512, 768, 2048}},
        {TensorType::Q6_K, {256, 512, 768, 2048}},
        {TensorType::IQ2_XXS, {256, 512, 768, 4096}},
        {TensorType::F16, {1, 7, 16, 31, 63, 64, 65, 100, 129, 1000}},
    };
    return c;
}

// multi(rows x acts) against dot_kernel per pair, bit for bit.
void expect_bit_identical(TensorType t, Isa isa, int64_t n, int64_t rows, int64_t n_act,
                          std::mt19937& rng) {
    const MultiDotFn multi = multi_dot_kernel(t, isa);
    ASSERT_NE(multi, nullptr) << tensor_type_name(t) << " " << isa_name(isa);
    const DotFn dot = dot_kernel(t, isa);
    const auto W = random_weights(t, rows, n, rng);
    const size_t rb = row_bytes(t, n);
    const TensorType at = dot_type(t);
    const size_t ab = row_bytes(at, n);
    std::normal_distribution<float> g(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(n));
    std::vector<uint8_t> A(ab * size_t(n_act));
    std::vector<const void*> act(static_cast<size_t>(n_act));
    for (int64_t a = 0; a < n_act; ++a) {
        for (auto& v : x) v = g(rng);
        quantize_activation(at, x.data(), A.data() + size_t(a) * ab, n);
        act[size_t(a)] = A.data() + size_t(a) * ab;
    }
    std::vector<float> Y(size_t(rows * n_act), -1.f);
    std::vector<float*> y(static_cast<size_t>(n_act));
    for (int64_t a = 0; a < n_act; ++a) y[size_t(a)] = Y.data() + a * rows;
    multi(n, W.data(), rb, rows, act.data(), n_act, y.data());
    for (int64_t a = 0; a < n_act; ++a)
        for (int64_t r = 0; r < rows; ++r) {
            const float want = dot(n, W.data() + size_t(r) * rb, act[size_t(a)]);
            const float got = Y[size_t(a * rows + r)];
            ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
                << tensor_type_name(t) << " " << isa_name(isa) << " n=" << n << " rows=" << rows
                << " acts=" << n_act << " row " << r << " act " << a << ": " << got << " vs " << want;
        }
}

TEST(MultiDot, EveryKernelIsBitIdenticalToTheDotKernel) {
    std::mt19937 rng(7);
    int checked = 0;
    for (const Case& c : cases())
        for (int i = 0; i < kIsaCount; ++i) {
            const Isa isa = Isa(i);
            if (!isa_supported(isa)) continue;
            for (int64_t n : c.lengths)
                for (int64_t n_act : {1, 2, 3, 4, 5, 7, 8, 9, 13, 17}) {
                    const int64_t rows = 1 + (n_act * 5 + n) % 7;  // 1..7, varied
                    expect_bit_identical(c.type, isa, n, rows, n_act, rng);
                    ++checked;
                }
        }
    EXPECT_GT(checked, 0);
}

// Kernels that work through their weight rows in blocks (16 rows for Q8_0 and IQ2_XXS: rows
// transposed or decoded into L2, then every tile of activations over them) must give the same
// bits across block boundaries and for a partial last block, with many activation tiles.
TEST(MultiDot, RowBlocksAndManyTilesStayBitIdentical) {
    std::mt19937 rng(9);
    for (const TensorType t : {TensorType::Q8_0, TensorType::IQ2_XXS, TensorType::Q2_K})
        for (int i = 0; i < kIsaCount; ++i) {
            const Isa isa = Isa(i);
            if (!isa_supported(isa)) continue;
            for (int64_t rows : {16, 17, 37})
                for (int64_t n_act : {6, 23, 40}) expect_bit_identical(t, isa, 2048, rows, n_act, rng);
        }
}

TEST(MultiDot, FollowsTheIsaCapLikeDotKernel) {
    std::mt19937 rng(8);
    for (int i = 0; i < kIsaCount; ++i) {
        const Isa isa = Isa(i);
        if (!isa_supported(isa)) continue;
        set_isa_cap(isa);
        // The cap lowers best_isa() to isa; a DS4_ISA setting in the environment may lower it
        // further (CI runs the suite that way too).
        ASSERT_LE(int(best_isa()), int(isa));
        for (const Case& c : cases()) {
            EXPECT_EQ(multi_dot_kernel(c.type), multi_dot_kernel(c.type, best_isa()));
            expect_bit_identical(c.type, best_isa(), c.lengths.back(), 3, 6, rng);
        }
    }
    set_isa_cap(Isa::Avx512Vnni);
}

void expect_iq2xxs_paths_agree(int64_t n) {
    std::mt19937 rng(9);
    const int64_t rows = 64, n_act = 11;
    const TensorType t = TensorType::IQ2_XXS;
    const auto W = random_weights(t, rows, n, rng);
    const size_t rb = row_bytes(t, n), ab = row_bytes(TensorType::Q8_K, n);
    std::normal_distribution<float> g(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(n));
    std::vector<uint8_t> A(ab * size_t(n_act));
    std::vector<const void*> act(static_cast<size_t>(n_act));
    for (int64_t a = 0; a < n_act; ++a) {
        for (auto& v : x) v = g(rng);
        quantize_activation(TensorType::Q8_K, x.data(), A.data() + size_t(a) * ab, n);
        act[size_t(a)] = A.data() + size_t(a) * ab;
    }
    auto run = [&](bool vbmi) {
        iq2xxs_allow_vbmi(vbmi);
        EXPECT_EQ(iq2xxs_vbmi_active(), vbmi);
        std::vector<float> Y(size_t(2 * rows * n_act));
        std::vector<float*> y(static_cast<size_t>(n_act));
        for (int64_t a = 0; a < n_act; ++a) y[size_t(a)] = Y.data() + a * rows;
        multi_dot_kernel(t, Isa::Avx512Vnni)(n, W.data(), rb, rows, act.data(), n_act, y.data());
        const DotFn dot = dot_kernel(t, Isa::Avx512Vnni);
        for (int64_t a = 0; a < n_act; ++a)
            for (int64_t r = 0; r < rows; ++r)
                Y[size_t(rows * n_act + a * rows + r)] = dot(n, W.data() + size_t(r) * rb, act[size_t(a)]);
        iq2xxs_allow_vbmi(true);
        return Y;
    };
    const auto lookup = run(false), vbmi = run(true);
    ASSERT_EQ(lookup.size(), vbmi.size());
    for (size_t i = 0; i < lookup.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(lookup[i]), std::bit_cast<uint32_t>(vbmi[i])) << i;
    // And both equal the multi-row results of the other path, pair by pair.
    for (int64_t i = 0; i < rows * n_act; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(vbmi[size_t(i)]), std::bit_cast<uint32_t>(vbmi[size_t(rows * n_act + i)]));
}

// The IQ2_XXS AVX-512 kernels decode blocks by codebook lookups or, on AVX512-VBMI CPUs, by
// vector permutes (one block at a time for many activations, two blocks at a time for one):
// every path gives the same bits, single row and multi-row (every codebook point and sign
// pattern occurs in the random rows), for even and odd numbers of blocks per row.
TEST(MultiDot, Iq2xxsLookupAndVbmiPathsAgree) {
    if (!isa_supported(Isa::Avx512Vnni) || !iq2xxs_vbmi_active()) GTEST_SKIP() << "no AVX512-VBMI";
    for (const int64_t n : {256, 768, 2048}) {
        SCOPED_TRACE(n);
        expect_iq2xxs_paths_agree(n);
    }
}

// On AVX512-VBMI CPUs the IQ2_XXS kernels run one activation (decode, and the one-row dot)
// and 2-5 activations (verification steps, experts chosen by a few rows) by the few-row path:
// each pair of blocks decoded in registers as 43 + w and applied to every row, the activation
// as vpdpbusd's signed operand, 43 x its lane sums taken off after. Every row must get the bits
// of the lookup decoder's path (independent code), for every row count of the path and the
// first beyond it, odd block counts, rows past the prefetch distance, and activations at
// +-127 (the largest products, and 43 x the largest lane sums).
TEST(MultiDot, Iq2xxsFewRowsEqualTheLookupPath) {
    if (!isa_supported(Isa::Avx512Vnni) || !iq2xxs_vbmi_active()) GTEST_SKIP() << "no AVX512-VBMI";
    const TensorType t = TensorType::IQ2_XXS;
    std::mt19937 rng(34);
    for (const int64_t n : {256, 768, 4096})
        for (const int64_t rows : {1, 3, 29}) {
            const auto W = random_weights(t, rows, n, rng);
            const size_t rb = row_bytes(t, n), ab = row_bytes(TensorType::Q8_K, n);
            for (int64_t n_act = 1; n_act <= 6; ++n_act) {
                std::normal_distribution<float> g(0.f, 1.f);
                std::vector<float> x(static_cast<size_t>(n));
                std::vector<uint8_t> A(ab * size_t(n_act));
                std::vector<const void*> act(static_cast<size_t>(n_act));
                for (int64_t a = 0; a < n_act; ++a) {
                    for (size_t i = 0; i < x.size(); ++i) x[i] = a == 1 ? (i % 3 ? 1.f : -1.f) : g(rng);
                    quantize_activation(TensorType::Q8_K, x.data(), A.data() + size_t(a) * ab, n);
                    act[size_t(a)] = A.data() + size_t(a) * ab;
                }
                auto run = [&](bool vbmi) {
                    iq2xxs_allow_vbmi(vbmi);
                    std::vector<float> Y(size_t(rows * n_act), -1.f);
                    std::vector<float*> y(static_cast<size_t>(n_act));
                    for (int64_t a = 0; a < n_act; ++a) y[size_t(a)] = Y.data() + a * rows;
                    multi_dot_kernel(t, Isa::Avx512Vnni)(n, W.data(), rb, rows, act.data(), n_act, y.data());
                    iq2xxs_allow_vbmi(true);
                    return Y;
                };
                const auto lookup = run(false), few = run(true);
                for (size_t i = 0; i < few.size(); ++i)
                    ASSERT_EQ(std::bit_cast<uint32_t>(few[i]), std::bit_cast<uint32_t>(lookup[i]))
                        << "n=" << n << " rows=" << rows << " acts=" << n_act << " value " << i;
            }
        }
}

// The AVX-512 Q8_0 kernel runs 2-8 activation rows (verification steps, a few sequences) by
// its few-row path: each weight chunk transposed in registers and applied to every row. Its
// results equal the scalar reference (q8_0.h's arithmetic) bit for bit, for every row count of
// that path and the first beyond it, over partial chunks, several 4096-column segments and
// enough weight rows to run past the prefetch distance; extreme codes included (weights -128
// and 127, activations +-127: the unsigned flip and its correction).
TEST(MultiDot, Q8_0FewRowsEqualTheScalarReference) {
    if (!isa_supported(Isa::Avx512Vnni)) GTEST_SKIP() << "no AVX-512 VNNI";
    const MultiDotFn multi = multi_dot_kernel(TensorType::Q8_0, Isa::Avx512Vnni);
    std::mt19937 rng(33);
    for (const int64_t n : {32, 544, 4096, 8736})
        for (const int64_t rows : {1, 3, 29}) {
            auto W = random_weights(TensorType::Q8_0, rows, n, rng);
            const size_t rb = row_bytes(TensorType::Q8_0, n);
            for (size_t b = 0; b < W.size() / 34; b += 5)  // every fifth block at the extremes
                for (int i = 0; i < 32; ++i) W[b * 34 + 2 + size_t(i)] = uint8_t(i % 2 ? 0x80 : 0x7f);
            for (int64_t n_act = 2; n_act <= 9; ++n_act) {
                std::normal_distribution<float> g(0.f, 1.f);
                std::vector<float> x(static_cast<size_t>(n));
                const size_t ab = row_bytes(TensorType::Q8_0, n);
                std::vector<uint8_t> A(ab * size_t(n_act));
                std::vector<const void*> act(static_cast<size_t>(n_act));
                for (int64_t a = 0; a < n_act; ++a) {
                    for (size_t i = 0; i < x.size(); ++i) x[i] = a == 1 && i % 64 < 32 ? (i % 2 ? 1.f : -1.f) : g(rng);
                    quantize_activation(TensorType::Q8_0, x.data(), A.data() + size_t(a) * ab, n);
                    act[size_t(a)] = A.data() + size_t(a) * ab;
                }
                std::vector<float> Y(size_t(rows * n_act), -1.f);
                std::vector<float*> y(static_cast<size_t>(n_act));
                for (int64_t a = 0; a < n_act; ++a) y[size_t(a)] = Y.data() + a * rows;
                multi(n, W.data(), rb, rows, act.data(), n_act, y.data());
                for (int64_t a = 0; a < n_act; ++a)
                    for (int64_t r = 0; r < rows; ++r) {
                        const float want = dot_q8_0_scalar(n, W.data() + size_t(r) * rb, act[size_t(a)]);
                        ASSERT_EQ(std::bit_cast<uint32_t>(Y[size_t(a * rows + r)]), std::bit_cast<uint32_t>(want))
                            << "n=" << n << " rows=" << rows << " acts=" << n_act << " row " << r << " act " << a;
                    }
            }
        }
}

TEST(MultiDot, NoneForFormatsWithoutOneOrInCompatMode) {
    EXPECT_EQ(multi_dot_kernel(TensorType::F32, Isa::Scalar), nullptr);
    EXPECT_EQ(multi_dot_kernel(TensorType::BF16, Isa::Avx2), nullptr);
    EXPECT_EQ(multi_dot_kernel(TensorType::Q8_K, Isa::Scalar), nullptr);  // activation format
    EXPECT_NE(multi_dot_kernel(TensorType::Q8_0, Isa::Scalar), nullptr);
    set_ggml_compat(true);
    for (const Case& c : cases()) EXPECT_EQ(multi_dot_kernel(c.type), nullptr);
    set_ggml_compat(false);
    EXPECT_NE(multi_dot_kernel(TensorType::IQ2_XXS), nullptr);
}

}  // namespace
}  // namespace ds4::quant
