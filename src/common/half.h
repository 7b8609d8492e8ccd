// IEEE binary16 (F16) and bfloat16 (BF16) conversions. Both narrowings round to nearest,
// ties to even, exactly like ggml and like the F16C instruction, so that a value quantized
// here and in the oracle is bit-identical.
#pragma once

#include <bit>
#include <cstdint>

namespace ds4 {

inline float f16_to_f32(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13) | (man ? 0x00400000u : 0u);  // inf / quiet nan
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else {  // subnormal: value = man * 2^-24, exact in f32
        const float v = float(man) * 0x1p-24f;
        bits = sign | std::bit_cast<uint32_t>(v);
    }
    return std::bit_cast<float>(bits);
}

inline uint16_t f32_to_f16(float f) {
    const uint32_t w = std::bit_cast<uint32_t>(f);
    const uint16_t sign = uint16_t((w >> 16) & 0x8000u);
    const uint32_t aw = w & 0x7fffffffu;
    if (aw > 0x7f800000u) return sign | 0x7e00u;   // nan -> quiet nan
    if (aw >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65536 -> inf
    if (aw < 0x38800000u) {                        // below the smallest normal half
        // Adding 0.5 (2^-1) aligns the half subnormal LSB (2^-24) with the f32 LSB of the
        // sum, so the FPU performs the round-to-nearest-even for us.
        const float r = std::bit_cast<float>(aw) + 0.5f;
        return sign | uint16_t(std::bit_cast<uint32_t>(r) - 0x3f000000u);
    }
    const uint32_t odd = (aw >> 13) & 1u;
    const uint32_t rounded = aw + 0xfffu + odd;  // RNE on the 13 dropped bits
    return sign | uint16_t((rounded - 0x38000000u) >> 13);
}

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 64u);  // quiet nan
    return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace ds4
