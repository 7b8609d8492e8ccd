// The ggml compatibility kernels (quant/ggml_compat/ggml_compat.h) against the oracle's own vec_dot: every
// result bit-identical, for every weight format, on weights quantized by ggml and on random
// blocks, activations converted by ggml, six value distributions and row lengths that cover
// each kernel's main loop and all of its tails. The kernels reproduce the zen4 build of
// libggml-cpu; where the oracle loads another CPU variant the tests skip.
#include <gtest/gtest.h>
#include <immintrin.h>  // the BF16 instruction, in one target("avx512bf16") function

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "quant/ggml_compat/ggml_compat.h"
#include "quant/quant.h"
#include "support/ggml_ref.h"
#include "support/quant_test_data.h"

namespace ds4::quant::testing {
namespace {

constexpr const char* kVariant = "zen4";

const oracle::Ggml& ggml() {
    const oracle::Ggml* g = oracle::Ggml::get();
    if (!g) throw std::runtime_error(oracle::Ggml::reason());
    return *g;
}

#define SKIP_UNLESS_ZEN4()                                                                        \
    if (ggml().cpu_variant() != kVariant)                                                         \
    GTEST_SKIP() << "the oracle loaded libggml-cpu-" << ggml().cpu_variant()                      \
                 << "; the compat kernels reproduce the " << kVariant << " variant only"

bool same_bits(float a, float b) {
    return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) || (std::isnan(a) && std::isnan(b));
}

struct Case {
    TensorType type;
    std::vector<int64_t> lengths;  // row lengths (multiples of the block size)
};

// Row lengths: below, at and past each loop's step, with every tail shape (F32: 64-value
// steps, then 16- and 8-wide chunks, then single values; MXFP4: block pairs, then one block).
const Case kCases[] = {
    {TensorType::F32, {1, 7, 8, 15, 16, 23, 24, 31, 40, 63, 64, 65, 79, 88, 127, 128, 200, 255, 256, 1000, 4096, 4159}},
    {TensorType::F16, {1, 7, 16, 63, 64, 65, 100, 127, 128, 255, 256, 1000, 4096, 4159}},
    {TensorType::BF16, {1, 7, 16, 63, 64, 65, 100, 127, 128, 255, 256, 1000, 4096, 4159}},
    {TensorType::Q8_0, {32, 64, 96, 256, 1024, 4096, 4128}},
    {TensorType::Q4_0, {32, 64, 96, 256, 1024, 4096, 4128}},
    {TensorType::MXFP4, {32, 64, 96, 160, 256, 1024, 4096, 4128}},
    {TensorType::Q2_K, {256, 512, 768, 4096}},
    {TensorType::Q4_K, {256, 512, 768, 4096}},
    {TensorType::Q5_K, {256, 512, 768, 4096}},
    {TensorType::Q6_K, {256, 512, 768, 4096}},
    {TensorType::IQ2_XXS, {256, 512, 768, 4096}},
};
void PrintTo(const Case& c, std::ostream* os) { *os << tensor_type_name(c.type); }
constexpr int64_t kRows = 6;  // weight rows per (distribution, length)

std::vector<uint8_t> ggml_weights(TensorType t, const std::vector<float>& x, int64_t n) {
    std::vector<uint8_t> q(row_bytes(t, int64_t(x.size())));
    if (t == TensorType::F32) {
        std::memcpy(q.data(), x.data(), q.size());
        return q;
    }
    const std::vector<float> ones(size_t(n), 1.0f);  // IQ2_XXS needs an importance matrix
    ggml().quantize_chunk(t, x.data(), q.data(), int64_t(x.size()) / n, n,
                          t == TensorType::IQ2_XXS ? ones.data() : nullptr);
    return q;
}

// Random bytes with sane scale fields: f16 scales in +-[2^-6, 2^3], MXFP4 exponents near 1,
// float formats finite. Q8_0 codes include -128 (ggml's sign trick then differs from x * y).
std::vector<uint8_t> random_weights(TensorType t, int64_t rows, int64_t n, std::mt19937& rng) {
    std::vector<uint8_t> q(size_t(rows) * row_bytes(t, n));
    for (auto& b : q) b = uint8_t(rng());
    auto scale16 = [&] { return uint16_t(((rng() & 1) << 15) | ((9 + rng() % 10) << 10) | (rng() & 0x3ff)); };
    auto put16 = [&](size_t at, uint16_t v) { std::memcpy(q.data() + at, &v, 2); };
    const size_t bsize = row_bytes(t, tensor_type_info(t)->block_values);
    switch (t) {
        case TensorType::F32:
            for (size_t i = 0; i < q.size(); i += 4) {
                const float v = std::ldexp(float(int(rng() % 2001) - 1000), -int(rng() % 20));
                std::memcpy(q.data() + i, &v, 4);
            }
            break;
        case TensorType::F16:
        case TensorType::BF16:
            for (size_t i = 0; i < q.size(); i += 2) {
                const float v = std::ldexp(float(int(rng() % 2001) - 1000), -int(rng() % 20));
                put16(i, t == TensorType::F16 ? f32_to_f16(v) : f32_to_bf16(v));
            }
            break;
        case TensorType::Q8_0:
        case TensorType::Q4_0:
        case TensorType::IQ2_XXS:
            for (size_t b = 0; b < q.size(); b += bsize) put16(b, scale16());
            break;
        case TensorType::Q6_K:
            for (size_t b = 0; b < q.size(); b += bsize) put16(b + 208, scale16());
            break;
        case TensorType::Q4_K:
        case TensorType::Q5_K:
            for (size_t b = 0; b < q.size(); b += bsize) put16(b, scale16()), put16(b + 2, scale16());
            break;
        case TensorType::Q2_K:
            for (size_t b = 0; b < q.size(); b += bsize) put16(b + 80, scale16()), put16(b + 82, scale16());
            break;
        case TensorType::MXFP4:
            for (size_t b = 0; b < q.size(); b += bsize) q[b] = uint8_t(118 + rng() % 20);
            break;
        default: ADD_FAILURE() << "no random blocks for " << tensor_type_name(t);
    }
    return q;
}

// Runs ours and ggml's on every row; returns the number of rows compared. `differ_fast`
// counts rows where the default (fast) kernel is not bit-identical (for the record).
int64_t expect_identical(TensorType t, int64_t n, const std::vector<uint8_t>& w,
                         const std::vector<uint8_t>& act, const std::string& what, int64_t* differ_fast) {
    const DotFn compat = compat::dot_kernel(t);
    const DotFn fast = format_ops(t)->dot[int(best_isa())] ? format_ops(t)->dot[int(best_isa())]
                                                             : format_ops(t)->dot[0];
    const size_t stride = row_bytes(t, n);
    const int64_t rows = int64_t(w.size() / stride);
    int failures = 0;
    for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* row = w.data() + size_t(r) * stride;
        const float theirs = ggml().vec_dot(t, n, row, act.data());
        const float ours = compat(n, row, act.data());
        if (!same_bits(ours, theirs) && failures++ < 3)
            ADD_FAILURE() << tensor_type_name(t) << " n=" << n << " " << what << " row " << r
                          << ": ours " << ours << " (0x" << std::hex << std::bit_cast<uint32_t>(ours)
                          << "), ggml " << theirs << " (0x" << std::bit_cast<uint32_t>(theirs) << std::dec << ")";
        if (!same_bits(fast(n, row, act.data()), theirs)) ++*differ_fast;
    }
    return rows;
}

class CompatDot : public ::testing::TestWithParam<Case> {};

TEST_P(CompatDot, BitIdenticalToOracleVecDot) {
    SKIP_UNLESS_ZEN4();
    const TensorType t = GetParam().type;
    const TensorType at = dot_type(t);
    ASSERT_EQ(ggml().vec_dot_type(t), at);
    int64_t compared = 0, differ_fast = 0;
    uint32_t seed = 100;
    std::mt19937 rng(7);
    for (const int64_t n : GetParam().lengths)
        for (const Dist dist : kAllDists) {
            const std::string what = dist_name(dist);
            std::vector<uint8_t> act(row_bytes(at, n), 0);
            ggml().from_float(at, random_values(dist, n, seed++).data(), act.data(), n);
            const auto x = random_values(dist, kRows * n, seed++, t == TensorType::F32 ? 32 : 256);
            compared += expect_identical(t, n, ggml_weights(t, x, n), act, what + ", ggml-quantized", &differ_fast);
            compared += expect_identical(t, n, random_weights(t, kRows, n, rng), act, what + ", random blocks", &differ_fast);
        }
    std::printf("%s: %lld rows compared; the fast %s kernel is not bit-identical on %lld\n", tensor_type_name(t).c_str(),
                (long long)compared, isa_name(best_isa()), (long long)differ_fast);
}

TEST_P(CompatDot, SwitchRoutesDotKernel) {
    const TensorType t = GetParam().type;
    set_ggml_compat(true);
    for (int i = 0; i < kIsaCount; ++i) EXPECT_EQ(dot_kernel(t, Isa(i)), compat::dot_kernel(t));
    EXPECT_EQ(dot_kernel(t), compat::dot_kernel(t));
    EXPECT_EQ(multi_dot_kernel(t), nullptr);  // batched kernels sum in their own order
    set_ggml_compat(false);
    EXPECT_NE(dot_kernel(t), compat::dot_kernel(t));
}

INSTANTIATE_TEST_SUITE_P(Formats, CompatDot, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& i) {
                             return std::string(tensor_type_name(i.param.type));
                         });

// The BF16 lane step against the instruction itself on every kind of bf16 (normal, denormal,
// zero, either sign), where this CPU has AVX512-BF16.
__attribute__((target("avx512f,avx512bf16"))) float hw_pair_step(float acc, uint16_t a0, uint16_t a1,
                                                                  uint16_t b0, uint16_t b1) {
    const __m512 c = _mm512_set1_ps(acc);
    const __m512i a = _mm512_set1_epi32(int(uint32_t(a0) | uint32_t(a1) << 16));
    const __m512i b = _mm512_set1_epi32(int(uint32_t(b0) | uint32_t(b1) << 16));
    return _mm512_cvtss_f32(_mm512_dpbf16_ps(c, (__m512bh)a, (__m512bh)b));
}

TEST(CompatBf16, PairStepEqualsTheInstruction) {
    if (!__builtin_cpu_supports("avx512bf16")) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
    std::mt19937 rng(11);
    // Exponents from the whole range, mostly small and around 1, so denormal products,
    // denormal sums and cancellations all occur.
    auto bf16 = [&] {
        const uint32_t r = rng();
        const uint32_t exp = r % 4 == 0 ? (r >> 8) % 3 : r % 4 == 1 ? 100 + (r >> 8) % 56 : (r >> 8) % 40;
        return uint16_t((r >> 31) << 15 | exp << 7 | ((r >> 16) & 0x7f));
    };
    int mismatches = 0;
    for (int i = 0; i < 200000; ++i) {
        const float acc = std::bit_cast<float>(uint32_t(uint32_t(bf16()) << 16 | (rng() & 0xffffu)));
        const uint16_t a0 = bf16(), a1 = bf16(), b0 = bf16(), b1 = bf16();
        const float hw = hw_pair_step(acc, a0, a1, b0, b1);
        const float ours = compat::bf16_pair_step(acc, a0, a1, b0, b1);
        if (!same_bits(hw, ours) && mismatches++ < 5)
            ADD_FAILURE() << std::hex << "acc 0x" << std::bit_cast<uint32_t>(acc) << " a 0x" << a0 << ",0x" << a1
                          << " b 0x" << b0 << ",0x" << b1 << ": hw 0x" << std::bit_cast<uint32_t>(hw)
                          << ", ours 0x" << std::bit_cast<uint32_t>(ours);
    }
    EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace ds4::quant::testing
