// F32, F16 and BF16 weights: conversions, reference dots and SIMD dots == scalar.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "common/half.h"
#include "quant/float/float_formats.h"
#include "quant/quant.h"
#include "support/quant_test_data.h"

namespace ds4::quant {
namespace {

using testing::Dist;

const float kInf = std::numeric_limits<float>::infinity();

std::vector<float> special_values() {
    return {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65520.0f, 1e6f, -kInf, 5.96e-8f, 2.98e-8f,
            1e-10f, 3.14159265f, 1.0f + 0x1p-11f, 1.0f + 0x1p-8f, 3e38f, 1e-40f};
}

TEST(QuantFloat, F16RowConversionsRoundToNearestEven) {
    const std::vector<float> x = special_values();
    const int64_t n = int64_t(x.size());
    std::vector<uint16_t> h(x.size()), act(x.size());
    quantize_row(TensorType::F16, x.data(), h.data(), n);
    quantize_activation(TensorType::F16, x.data(), act.data(), n);
    std::vector<float> back(x.size());
    dequantize_row(TensorType::F16, h.data(), back.data(), n);
    for (size_t i = 0; i < x.size(); ++i) {
        EXPECT_EQ(h[i], f32_to_f16(x[i])) << x[i];
        EXPECT_EQ(act[i], h[i]) << x[i];
        EXPECT_EQ(std::bit_cast<uint32_t>(back[i]), std::bit_cast<uint32_t>(f16_to_f32(h[i])));
    }
    EXPECT_EQ(h[4], 0x7bffu);                   // 65504: largest half
    EXPECT_EQ(h[5], 0x7c00u);                   // 65520 rounds up to inf
    EXPECT_EQ(h[12], 0x3c00u);                  // 1 + 2^-11: tie, to even (1.0)
    EXPECT_EQ(back[8], 0x1p-24f);               // smallest subnormal survives
}

// The F16C row conversion that quantize_activation uses on AVX2 machines: the bits of the
// scalar conversion over a sweep of all float bit patterns (every 251st), the special values
// and every tail length; NaNs stay NaNs.
TEST(QuantFloat, F16cRowConversionEqualsScalar) {
    if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no AVX2/F16C";
    std::vector<float> x = special_values();
    for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 251) x.push_back(std::bit_cast<float>(uint32_t(b)));
    std::vector<uint16_t> got(x.size());
    avx2::f32_to_f16_row(x.data(), got.data(), int64_t(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
        if (std::isnan(x[i])) {
            ASSERT_TRUE(std::isnan(f16_to_f32(got[i]))) << i;
            continue;
        }
        ASSERT_EQ(got[i], f32_to_f16(x[i])) << fmt::format("{:a} ({:#010x})", x[i], std::bit_cast<uint32_t>(x[i]));
    }
    for (int64_t n = 1; n <= 17; ++n) {  // tails: nothing written past n
        std::vector<uint16_t> y(size_t(n + 1), 0xabcd);
        avx2::f32_to_f16_row(x.data() + 3, y.data(), n);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[size_t(i)], f32_to_f16(x[size_t(3 + i)])) << n;
        ASSERT_EQ(y[size_t(n)], 0xabcd) << n;
    }
}

TEST(QuantFloat, Bf16RowConversionsRoundToNearestEven) {
    const std::vector<float> x = special_values();
    const int64_t n = int64_t(x.size());
    std::vector<uint16_t> h(x.size()), act(x.size());
    quantize_row(TensorType::BF16, x.data(), h.data(), n);
    quantize_activation(TensorType::BF16, x.data(), act.data(), n);
    std::vector<float> back(x.size());
    dequantize_row(TensorType::BF16, h.data(), back.data(), n);
    for (size_t i = 0; i < x.size(); ++i) {
        EXPECT_EQ(h[i], f32_to_bf16(x[i])) << x[i];
        EXPECT_EQ(act[i], h[i]) << x[i];
        EXPECT_EQ(std::bit_cast<uint32_t>(back[i]), uint32_t(h[i]) << 16);
    }
    EXPECT_EQ(h[13], 0x3f80u);  // 1 + 2^-8: tie, to even (1.0)
    EXPECT_EQ(back[4], 65536.0f);
}

TEST(QuantFloat, F32IsACopy) {
    const std::vector<float> x = special_values();
    std::vector<float> q(x.size()), back(x.size());
    quantize_row(TensorType::F32, x.data(), q.data(), int64_t(x.size()));
    dequantize_row(TensorType::F32, q.data(), back.data(), int64_t(x.size()));
    for (size_t i = 0; i < x.size(); ++i)
        EXPECT_EQ(std::bit_cast<uint32_t>(back[i]), std::bit_cast<uint32_t>(x[i]));
}

TEST(QuantFloat, DotsOfSmallExactVectors) {
    const float w[5] = {1, 2, 3, -0.5f, 0.25f}, a[5] = {4, 5, 6, 8, -16};  // 32 - 4 - 4 = 24
    for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
        std::vector<uint8_t> wq(row_bytes(t, 5)), aq(row_bytes(t, 5));
        quantize_row(t, w, wq.data(), 5);
        quantize_activation(t, a, aq.data(), 5);
        for (Isa isa : testing::supported_isas())
            EXPECT_EQ(dot_kernel(t, isa)(5, wq.data(), aq.data()), 24.0f)
                << tensor_type_name(t) << " " << isa_name(isa);
    }
}

TEST(QuantFloat, EveryIsaHasItsOwnKernel) {
    for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
        const FormatOps* ops = format_ops(t);
        ASSERT_NE(ops, nullptr);
        EXPECT_EQ(ops->type, t);
        EXPECT_EQ(ops->dot_type, t);
        for (int i = 0; i < kIsaCount; ++i) EXPECT_NE(ops->dot[i], nullptr);
        EXPECT_NE(ops->dot[1], ops->dot[0]);
        EXPECT_NE(ops->dot[2], ops->dot[1]);
    }
}

// SIMD kernels sum in float lanes, the scalar reference in double: they agree up to float
// summation error relative to sum |w_i a_i|. Measured worst here (AVX2 and AVX-512 alike):
// 8.5e-8 (F32), 5.7e-8 (F16), 8.5e-8 (BF16) over 1..4099 values; the bound leaves margin for
// other seeds and row lengths.
constexpr double kFloatDotTol = 2e-6;

TEST(QuantFloat, SimdDotsEqualScalar) {
    const std::vector<int64_t> sizes = {1, 3, 15, 16, 17, 31, 63, 64, 65, 100, 1000, 4096, 4099};
    for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
        for (Isa isa : testing::supported_isas()) {
            if (isa == Isa::Scalar) continue;
            const double err = testing::max_err_vs_scalar(t, isa, sizes);
            EXPECT_LE(err, kFloatDotTol) << tensor_type_name(t) << " " << isa_name(isa);
            RecordProperty(tensor_type_name(t) + "_" + isa_name(isa), fmt::format("{:.3g}", err));
        }
    }
}

TEST(QuantFloat, ScalarDotEqualsExactSumOfDequantizedProducts) {
    for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
        const testing::DotCase c = testing::make_dot_case(t, 4096, Dist::Outliers, 7);
        double exact = 0;
        for (size_t i = 0; i < c.wf.size(); ++i) exact += double(c.wf[i]) * c.af[i];
        const float got = format_ops(t)->dot[0](c.n, c.w.data(), c.a.data());
        EXPECT_LE(testing::dot_rel_err(got, exact, c.abs_sum()), 1e-7) << tensor_type_name(t);
    }
}

TEST(QuantFloat, DispatchFallsBackAndBestIsaIsSupported) {
    EXPECT_TRUE(isa_supported(Isa::Scalar));
    EXPECT_TRUE(isa_supported(best_isa()));
    EXPECT_EQ(dot_kernel(TensorType::F16, Isa::Scalar), &dot_f16_scalar);
    for (Isa isa : testing::supported_isas())
        EXPECT_EQ(dot_kernel(TensorType::F16, isa), format_ops(TensorType::F16)->dot[int(isa)]);
    EXPECT_THROW(dot_type(TensorType::Q5_0), Error);
}

}  // namespace
}  // namespace ds4::quant
