// Hidden states on the wire (spec PRODUCT.md §7.1 --dist-activation-bits): 32-bit floats as
// they are, IEEE binary16 (round to nearest even; beyond +-65504 becomes infinity), or FP8 E4M3
// with exponent bias 7 that saturates at +-240 (exponent field 15 is not used; NaN and values
// of magnitude >= 240 become +-240; subnormals are multiples of 2^-9). All little-endian.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ds4::dist {

inline constexpr float kFp8Max = 240.0f;

uint8_t f32_to_fp8(float v);
float fp8_to_f32(uint8_t c);

// Bytes of n values at `bits` (32, 16 or 8); throws ProtocolError for another width.
size_t activation_bytes(size_t n, uint32_t bits);
std::vector<uint8_t> encode_activations(std::span<const float> values, uint32_t bits);
// Decodes exactly out.size() values; throws ProtocolError when `wire` is not that many values at
// `bits`.
void decode_activations(std::span<const uint8_t> wire, uint32_t bits, std::span<float> out);

}  // namespace ds4::dist
