#include "dist/activation.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "common/half.h"
#include "dist/protocol.h"

namespace ds4::dist {

uint8_t f32_to_fp8(float v) {
    const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
    const float a = std::fabs(v);
    if (std::isnan(a) || a >= kFp8Max) return sign | 0x77;  // the largest code, 1.875 x 2^7
    if (a < 0x1p-6f) {
        // Subnormal steps of 2^-9, rounded half away from zero; 8 steps is the smallest normal.
        const int m = int(std::floor(a * 512.0f + 0.5f));
        return sign | uint8_t(m);  // m <= 8: 8 is exponent 1, mantissa 0 (0x08)
    }
    int e2 = 0;
    const float f = std::frexp(a, &e2);  // a = f x 2^e2, f in [0.5, 1)
    int exp = e2 - 1 + 7;
    int m = int(std::floor((f * 2.0f - 1.0f) * 8.0f + 0.5f));
    if (m == 8) {
        m = 0;
        ++exp;
    }
    if (exp >= 15) return sign | 0x77;
    return sign | uint8_t(exp << 3 | m);
}

float fp8_to_f32(uint8_t c) {
    const float sign = (c & 0x80) ? -1.0f : 1.0f;
    const int exp = (c >> 3) & 0xF, m = c & 0x7;
    if (exp == 0) return sign * float(m) * 0x1p-9f;
    if (exp == 15) return sign * kFp8Max;
    return sign * std::ldexp(1.0f + float(m) / 8.0f, exp - 7);
}

size_t activation_bytes(size_t n, uint32_t bits) {
    if (bits != 32 && bits != 16 && bits != 8)
        throw ProtocolError(fmt::format("dist: hidden states are 32, 16 or 8 bits, not {}", bits));
    return n * (bits / 8);
}

std::vector<uint8_t> encode_activations(std::span<const float> values, uint32_t bits) {
    std::vector<uint8_t> out(activation_bytes(values.size(), bits));
    if (bits == 32 && std::endian::native == std::endian::little) {
        std::memcpy(out.data(), values.data(), out.size());
    } else if (bits == 32) {
        for (size_t i = 0; i < values.size(); ++i) {
            uint32_t u;
            std::memcpy(&u, &values[i], 4);
            for (int b = 0; b < 4; ++b) out[4 * i + b] = uint8_t(u >> (8 * b));
        }
    } else if (bits == 16) {
        for (size_t i = 0; i < values.size(); ++i) {
            const uint16_t h = f32_to_f16(values[i]);
            out[2 * i] = uint8_t(h);
            out[2 * i + 1] = uint8_t(h >> 8);
        }
    } else {
        for (size_t i = 0; i < values.size(); ++i) out[i] = f32_to_fp8(values[i]);
    }
    return out;
}

void decode_activations(std::span<const uint8_t> wire, uint32_t bits, std::span<float> out) {
    if (wire.size() != activation_bytes(out.size(), bits))
        throw ProtocolError(fmt::format("dist: {} bytes of hidden state are not {} values at {} bits", wire.size(),
                                        out.size(), bits));
    if (bits == 32 && std::endian::native == std::endian::little) {
        std::memcpy(out.data(), wire.data(), wire.size());
    } else if (bits == 32) {
        for (size_t i = 0; i < out.size(); ++i) {
            const uint32_t u = uint32_t(wire[4 * i]) | uint32_t(wire[4 * i + 1]) << 8 |
                               uint32_t(wire[4 * i + 2]) << 16 | uint32_t(wire[4 * i + 3]) << 24;
            std::memcpy(&out[i], &u, 4);
        }
    } else if (bits == 16) {
        for (size_t i = 0; i < out.size(); ++i) out[i] = f16_to_f32(uint16_t(wire[2 * i] | wire[2 * i + 1] << 8));
    } else {
        for (size_t i = 0; i < out.size(); ++i) out[i] = fp8_to_f32(wire[i]);
    }
}

}  // namespace ds4::dist
