// Hidden states on the wire (src/dist/activation.h): 32 bits exact, IEEE f16, and FP8 E4M3
// with bias 7 saturating at 240: the codes of known values (worked out by hand from the
// format), every finite code round-trips, codes order like their values, sizes are checked.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "dist/activation.h"
#include "dist/protocol.h"

namespace {

using namespace ds4::dist;

TEST(DistActivation, Fp8CodesOfKnownValues) {
    EXPECT_EQ(f32_to_fp8(0.0f), 0x00);
    EXPECT_EQ(f32_to_fp8(-0.0f), 0x80);
    EXPECT_EQ(f32_to_fp8(1.0f), 0x38);    // exponent 7 (bias 7), mantissa 0
    EXPECT_EQ(f32_to_fp8(-1.0f), 0xB8);
    EXPECT_EQ(f32_to_fp8(0.5f), 0x30);
    EXPECT_EQ(f32_to_fp8(1.125f), 0x39);  // mantissa steps of 1/8
    EXPECT_EQ(f32_to_fp8(1.0625f), 0x39); // half a step: away from zero
    EXPECT_EQ(f32_to_fp8(1.05f), 0x38);
    EXPECT_EQ(f32_to_fp8(3.0f), 0x44);    // 1.5 x 2^1: exponent 8, mantissa 4
    EXPECT_EQ(f32_to_fp8(240.0f), 0x77);  // 1.875 x 2^7, the largest
    EXPECT_EQ(f32_to_fp8(239.0f), 0x77);
    EXPECT_EQ(f32_to_fp8(1e6f), 0x77);    // saturates
    EXPECT_EQ(f32_to_fp8(-1e6f), 0xF7);
    EXPECT_EQ(f32_to_fp8(std::numeric_limits<float>::infinity()), 0x77);
    EXPECT_EQ(f32_to_fp8(std::nanf("")), 0x77);
    EXPECT_EQ(f32_to_fp8(0x1p-9f), 0x01);  // the smallest subnormal
    EXPECT_EQ(f32_to_fp8(0x1p-10f), 0x01); // half of it: away from zero
    EXPECT_EQ(f32_to_fp8(0x1p-11f), 0x00);
    EXPECT_EQ(f32_to_fp8(0x1p-6f), 0x08);  // the smallest normal
    EXPECT_EQ(f32_to_fp8(7.5f * 0x1p-9f), 0x08);
    EXPECT_EQ(fp8_to_f32(0x38), 1.0f);
    EXPECT_EQ(fp8_to_f32(0x77), 240.0f);
    EXPECT_EQ(fp8_to_f32(0x7F), 240.0f);  // exponent field 15 is not used: the maximum
    EXPECT_EQ(fp8_to_f32(0x03), 3.0f * 0x1p-9f);
}

TEST(DistActivation, EveryFiniteFp8CodeRoundTripsInOrder) {
    float prev = -1;
    for (int c = 0; c <= 0x77; ++c) {
        const float v = fp8_to_f32(uint8_t(c));
        EXPECT_GT(v, prev) << c;
        prev = v;
        EXPECT_EQ(f32_to_fp8(v), c) << c;
        EXPECT_EQ(f32_to_fp8(-v), c | 0x80) << c;
    }
}

TEST(DistActivation, WidthsAndSizes) {
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 4.0f);
    std::vector<float> v(1000);
    for (auto& x : v) x = nd(rng);
    v[0] = 65504.0f;
    v[1] = 1e5f;
    std::vector<float> back(v.size());
    const auto w32 = encode_activations(v, 32);
    ASSERT_EQ(w32.size(), 4000u);
    decode_activations(w32, 32, back);
    EXPECT_EQ(std::memcmp(back.data(), v.data(), 4000), 0);
    const auto w16 = encode_activations(v, 16);
    ASSERT_EQ(w16.size(), 2000u);
    EXPECT_EQ(w16[0] | w16[1] << 8, 0x7BFF);  // 65504, the largest half, little-endian
    decode_activations(w16, 16, back);
    EXPECT_EQ(back[0], 65504.0f);
    EXPECT_TRUE(std::isinf(back[1]));
    for (size_t i = 2; i < v.size(); ++i) EXPECT_NEAR(back[i], v[i], std::fabs(v[i]) / 1024) << i;
    const auto w8 = encode_activations(v, 8);
    ASSERT_EQ(w8.size(), 1000u);
    decode_activations(w8, 8, back);
    EXPECT_EQ(back[0], 240.0f);
    for (size_t i = 2; i < v.size(); ++i) EXPECT_NEAR(back[i], v[i], std::fabs(v[i]) / 16 + 0x1p-10f) << i;
    EXPECT_THROW(decode_activations(w16, 8, back), ProtocolError);
    EXPECT_THROW(decode_activations(std::span<const uint8_t>(w8.data(), 999), 8, back), ProtocolError);
    EXPECT_THROW(encode_activations(v, 12), ProtocolError);
}

}  // namespace
