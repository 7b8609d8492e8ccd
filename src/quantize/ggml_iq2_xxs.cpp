// ggml's IQ2_XXS quantizer (quantize_row_iq2_xxs_impl, with its tables from iq2xs_init_impl)
// as facts: the codebook as 2-bit levels, a map from every 8-level pattern to its codebook
// index, and for a pattern off the codebook its neighbours (the points at the two smallest
// squared distances, in (distance, index) order: the first of equal candidates wins).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "common/half.h"
#include "quant/blocks.h"
#include "quant/ggml_fit.h"
#include "quant/iq2_xxs/iq2_xxs_grid.h"

namespace ds4::quantize {
namespace {

using quant::ggml_fit::nearest_int;

constexpr int kMapSize = 43692;  // patterns of levels 0..2 (and 3) over 8 positions, as ggml's
constexpr int kMaxQ = 3;

struct Tables {
    int8_t level[256][8];          // codebook point: level 0..2 per position (value 2 l + 1)
    std::vector<int> map;          // pattern -> index, or -(offset + 1) into neighbours
    std::vector<uint16_t> neighbours;  // at offset: count, then the indices

    Tables() : map(kMapSize, -1) {
        for (int k = 0; k < 256; ++k) {
            int u = 0;
            for (int i = 0; i < 8; ++i) {
                const int m = int((quant::kIq2xxsGrid[k] >> (8 * i)) & 255);
                level[k][i] = int8_t(m == 8 ? 0 : m == 25 ? 1 : 2);
                u |= level[k][i] << (2 * i);
            }
            map[size_t(u)] = k;
        }
        std::vector<std::pair<int, int>> dist(256);
        for (int u = 0; u < kMapSize; ++u) {
            if (map[size_t(u)] >= 0) continue;
            for (int j = 0; j < 256; ++j) {
                int d2 = 0;
                for (int i = 0; i < 8; ++i) {
                    const int d = 2 * level[j][i] - 2 * ((u >> (2 * i)) & 3);
                    d2 += d * d;
                }
                dist[size_t(j)] = {d2, j};
            }
            std::sort(dist.begin(), dist.end());
            map[size_t(u)] = -int(neighbours.size()) - 1;
            const size_t count_at = neighbours.size();
            neighbours.push_back(0);
            int distinct = 1, d2 = dist[0].first;
            for (const auto& [d, j] : dist) {
                if (d > d2) {
                    if (distinct == 2) break;
                    d2 = d, ++distinct;
                }
                neighbours.push_back(uint16_t(j));
            }
            neighbours[count_at] = uint16_t(neighbours.size() - count_at - 1);
        }
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

// The codebook point nearest (weighted) to xval at `scale` among the pattern's neighbours;
// writes its levels to L.
int best_neighbour(const Tables& t, int u, const float* xval, const float* w, float scale, int8_t* L) {
    const uint16_t* nb = t.neighbours.data() + (-t.map[size_t(u)] - 1);
    float best = 3.40282347e38f;
    int index = nb[1];
    for (int j = 1; j <= nb[0]; ++j) {
        float d2 = 0;
        for (int i = 0; i < 8; ++i) {
            const float diff = scale * float(2 * t.level[nb[j]][i] + 1) - xval[i];
            d2 += w[i] * diff * diff;
        }
        if (d2 < best) best = d2, index = nb[j];
    }
    for (int i = 0; i < 8; ++i) L[i] = t.level[index][i];
    return index;
}

int pattern(const int8_t* L) {
    int u = 0;
    for (int i = 0; i < 8; ++i) u |= L[i] << (2 * i);
    return u;
}

// Levels of 8 values at inverse scale id, moved onto the codebook; returns the point.
int levels_on_grid(const Tables& t, const float* xval, const float* waux, float id, float scale, int8_t* L) {
    for (int i = 0; i < 8; ++i) L[i] = int8_t(std::clamp(nearest_int(0.5f * (id * xval[i] - 1)), 0, kMaxQ - 1));
    const int u = pattern(L);
    return t.map[size_t(u)] >= 0 ? t.map[size_t(u)] : best_neighbour(t, u, xval, waux, scale, L);
}

// One group of 32: signs (an even count of negatives per 8), then the scale search. Returns
// the group's scale (0: all codes 0) and fills the group's two 32-bit words except the scale.
float fit_group(const Tables& t, const float* xb, const float* qw, float sigma2, uint32_t* q2) {
    float weight[32], waux[32], xval[32];
    int8_t L[32], Laux[32];
    uint8_t signs[4];
    for (int i = 0; i < 32; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
    for (int i = 0; i < 32; ++i) waux[i] = std::sqrt(weight[i]);
    for (int k = 0; k < 4; ++k) {
        int nflip = 0;
        uint8_t s = 0;
        for (int i = 0; i < 8; ++i) {
            const float v = xb[8 * k + i];
            xval[8 * k + i] = v >= 0 ? v : -v;
            if (!(v >= 0)) ++nflip, s = uint8_t(s | (1 << i));
        }
        if (nflip % 2) {  // flip back the value whose sign costs least
            int imin = 0;
            float min = weight[8 * k] * xb[8 * k] * xb[8 * k];
            for (int i = 1; i < 8; ++i) {
                const float ax = weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                if (ax < min) min = ax, imin = i;
            }
            xval[8 * k + imin] = -xval[8 * k + imin];
            s = uint8_t(s ^ (1 << imin));
        }
        signs[k] = s & 127;
    }
    float max = xval[0];
    for (int i = 1; i < 32; ++i) max = std::max(max, xval[i]);
    if (max < 1e-15f) return 0;
    float scale = quant::ggml_fit::fit_positive(32, kMaxQ + 1, xval, reinterpret_cast<uint8_t*>(L), weight);
    const float eff_max = scale * kMaxQ;
    if (eff_max <= 0) return 0;
    auto sums = [&](const int8_t* lv, float& sumqx, float& sumq2) {
        sumqx = sumq2 = 0;
        for (int i = 0; i < 32; ++i) {
            const float q = float(2 * lv[i] + 1);
            sumqx += weight[i] * xval[i] * q;
            sumq2 += weight[i] * q * q;
        }
    };
    float best = 0;
    for (int is = -6; is <= 6; ++is) {
        const float id = (float(2 * kMaxQ - 1) + float(is) * 0.1f) / eff_max;
        for (int k = 0; k < 4; ++k) levels_on_grid(t, xval + 8 * k, waux + 8 * k, id, 1 / id, Laux + 8 * k);
        float sumqx, sumq2;
        sums(Laux, sumqx, sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2, best = scale * sumqx;
            std::memcpy(L, Laux, 32);
        }
    }
    int index[4];
    if (scale > 0) {
        for (int k = 0; k < 4; ++k) index[k] = levels_on_grid(t, xval + 8 * k, waux + 8 * k, 1 / scale, scale, L + 8 * k);
        float sumqx, sumq2;
        sums(L, sumqx, sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (scale < 0) {  // ggml: "should never happen"; the signs take the sign instead
        scale = -scale;
        for (uint8_t& s : signs) s = uint8_t(~s & 127);
    }
    for (int k = 0; k < 4; ++k) {
        const int u = pattern(L + 8 * k);
        index[k] = t.map[size_t(u)];  // on the codebook here (fit_positive's levels are too)
        if (index[k] < 0) index[k] = 0;
        q2[0] |= uint32_t(index[k]) << (8 * k);
        q2[1] |= uint32_t(signs[k]) << (7 * k);
    }
    return scale;
}

}  // namespace

// nrows x n values with importance weights qw (n per row, shared by every row).
void iq2_xxs_row_ggml(const float* x, void* dst, int64_t n, const float* qw) {
    const Tables& t = tables();
    auto* y = static_cast<quant::BlockIQ2_XXS*>(dst);
    for (int64_t b = 0; b < n / quant::kQK_K; ++b) {
        const float* xbl = x + quant::kQK_K * b;
        uint32_t q2[16] = {};
        float scales[8];
        float sumx2 = 0;
        for (int i = 0; i < quant::kQK_K; ++i) sumx2 += xbl[i] * xbl[i];
        const float sigma2 = sumx2 / quant::kQK_K;
        float max_scale = 0;
        for (int g = 0; g < 8; ++g) {
            scales[g] = fit_group(t, xbl + 32 * g, qw + quant::kQK_K * b + 32 * g, sigma2, q2 + 2 * g);
            max_scale = std::max(max_scale, scales[g]);
        }
        y[b].d = f32_to_f16(0.f);
        if (max_scale == 0) {
            std::memset(y[b].qs, 0, sizeof(y[b].qs));
            continue;
        }
        const float d = max_scale / 31;
        y[b].d = f32_to_f16(d);
        const float id = 1 / d;
        for (int g = 0; g < 8; ++g)
            q2[2 * g + 1] |= uint32_t(std::clamp(nearest_int(0.5f * (id * scales[g] - 1)), 0, 15)) << 28;
        std::memcpy(y[b].qs, q2, sizeof(q2));
    }
}

}  // namespace ds4::quantize
