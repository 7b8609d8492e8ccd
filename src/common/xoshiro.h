// xoshiro256** (Blackman & Vigna) seeded through splitmix64: the project's one PRNG, so a seed
// gives the same numbers on every platform and standard library (<random>'s distributions are
// implementation-defined). Used by the sampler and the model generator.
#pragma once

#include <cstdint>

namespace ds4 {

inline uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

class Xoshiro256 {
public:
    explicit Xoshiro256(uint64_t seed = 0) { reseed(seed); }

    void reseed(uint64_t seed) {
        for (auto& w : s_) w = splitmix64(seed);
    }

    uint64_t next() {
        const uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }

    // Uniform in [0, 1) with 53 random bits.
    double uniform() { return double(next() >> 11) * 0x1.0p-53; }

private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    uint64_t s_[4];
};

}  // namespace ds4
