// Packing of a tile of Q8_K activation rows for the multi-row K-quant kernels
// (*_multi_avx512.cpp only, after x86_simd.h): the tile's rows interleaved so that one
// pointer and constant offsets reach every row (codes per 64 values, block scales, bsums).
#pragma once

#include <cstdint>
#include <vector>

#include "quant/blocks.h"

namespace ds4::quant {
namespace {

// A 64-byte line: the tiles' code buffers are line-aligned, so no vector load splits a line.
struct alignas(64) Q8KLine {
    int8_t b[64];
};

struct Q8KTile {
    std::vector<Q8KLine> lines;  // storage of qs
    int8_t* qs = nullptr;        // [nb * 4 chunks of 64][T][64]
    std::vector<float> d;       // [nb][T]
    std::vector<int16_t> bsums; // [nb][T][16]

    void pack(const void* const* act, int T, int64_t nb) {
        if (lines.size() < size_t(nb * 4 * T)) lines.resize(size_t(nb * 4 * T));
        qs = lines.data()->b;
        if (d.size() < size_t(nb * T)) d.resize(size_t(nb * T));
        if (bsums.size() < size_t(nb * T * 16)) bsums.resize(size_t(nb * T * 16));
        for (int t = 0; t < T; ++t) {
            const auto* a = static_cast<const BlockQ8_K*>(act[t]);
            for (int64_t b = 0; b < nb; ++b) {
                d[size_t(b * T + t)] = a[b].d;
                for (int c = 0; c < 4; ++c)
                    _mm512_store_si512(&qs[size_t(((b * 4 + c) * T + t) * 64)],
                                        _mm512_loadu_si512(a[b].qs + 64 * c));
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(&bsums[size_t((b * T + t) * 16)]),
                                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].bsums)));
            }
        }
    }
};

}  // namespace
}  // namespace ds4::quant
