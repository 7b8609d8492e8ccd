// Deterministic random numbers for the generator: the same seed gives the same bytes on every
// platform and compiler, so no <random> distributions (their output is implementation-defined)
// and no libm calls in the sampling path.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/xoshiro.h"

namespace ds4::gen {

// FNV-1a: a stable hash of a tensor name, so a tensor's values depend on its name and the
// seed only (not on the order or number of other tensors).
inline uint64_t fnv1a64(std::string_view s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    return h;
}

// The project PRNG (common/xoshiro.h) with the generator's distributions.
class Rng {
public:
    explicit Rng(uint64_t seed) : x_(seed) {}
    // One independent stream per (seed, tensor, row): rows can be generated in any order and
    // on any thread with identical results.
    Rng(uint64_t seed, uint64_t tensor_hash, uint64_t row)
        : Rng(seed ^ splitmix_once(tensor_hash + 0x632be59bd9b4e019ull * (row + 1))) {}

    uint64_t next() { return x_.next(); }

    // Uniform integer in [0, n) (multiply-high; bias < n / 2^64, irrelevant here).
    uint32_t below(uint32_t n) { return uint32_t((unsigned __int128)next() * n >> 64); }

    // Uniform in [0, 1) with 24 bits.
    float uniform() { return float(next() >> 40) * 0x1p-24f; }

    // Approximately standard normal: Irwin-Hall sum of four 16-bit uniforms, rescaled to
    // mean 0 and variance 1 (bounded at ±3.46; tails do not matter for random weights). Pure
    // integer arithmetic plus one exact conversion and one multiply: bit-reproducible.
    float normal() {
        const uint64_t b = next();
        const int32_t s = int32_t(b & 0xffff) + int32_t((b >> 16) & 0xffff) +
                          int32_t((b >> 32) & 0xffff) + int32_t(b >> 48);
        // sum of 4 uniforms on {0..65535}: mean 131070, variance 4 (65536^2 - 1) / 12.
        constexpr float kScale = 1.7320508075688772f / 65536.0f;  // sqrt(3) / 65536
        return float(s - 131070) * kScale;
    }

private:
    static uint64_t splitmix_once(uint64_t x) { return splitmix64(x); }
    Xoshiro256 x_;
};

}  // namespace ds4::gen
