#include "quant/ggml_fit.h"

#include <algorithm>
#include <cmath>

namespace ds4::quant::ggml_fit {
namespace {

inline int clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

}  // namespace

// Every expression keeps ggml's association (w * x * l is (w * x) * l) and the sums run in
// index order: a different rounding anywhere can pick another candidate scale.
float fit_symmetric(int n, int nmax, const float* x, int8_t* L, const float* qw) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) amax = ax, max = x[i];
    }
    if (amax < 1e-15f) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    auto weight = [&](int i) { return qw ? qw[i] : x[i] * x[i]; };
    // sum w x l and sum w l^2 for codes at inverse scale iscale (and the codes, when L).
    auto sums = [&](float iscale, float& sumlx, float& suml2, int8_t* codes) {
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const int l = clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            if (codes) codes[i] = int8_t(l + nmax);
            const float w = weight(i);
            sumlx += w * x[i] * float(l);
            suml2 += w * float(l) * float(l);
        }
    };
    float sumlx, suml2;
    sums(float(-nmax) / max, sumlx, suml2, L);
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        const float iscale = -(float(nmax) + 0.1f * float(is)) / max;
        sums(iscale, sumlx, suml2, nullptr);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            sums(iscale, sumlx, suml2, L);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

float fit_with_min(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                   float* neg_min, float rmin, float rdelta, int nstep, bool use_mad) {
    auto err = [use_mad](float diff) { return use_mad ? std::fabs(diff) : diff * diff; };
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += weights[i];
        sum_x += weights[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *neg_min = -min;
        return 0.f;
    }
    float iscale = float(nmax) / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        L[i] = uint8_t(clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
        const float diff = scale * float(L[i]) + min - x[i];
        best_error += weights[i] * err(diff);
    }
    if (nstep < 1) {
        *neg_min = -min;
        return scale;
    }
    uint8_t aux[256];  // n <= 256 (ggml uses it with 32)
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * float(is) + float(nmax)) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            const int l = clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
            aux[i] = uint8_t(l);
            const float w = weights[i];
            sum_l += w * float(l);
            sum_l2 += w * float(l) * float(l);
            sum_xl += w * float(l) * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float cur_error = 0;
        for (int i = 0; i < n; ++i) {
            const float diff = this_scale * float(aux[i]) + this_min - x[i];
            cur_error += weights[i] * err(diff);
        }
        if (cur_error < best_error) {
            for (int i = 0; i < n; ++i) L[i] = aux[i];
            best_error = cur_error;
            scale = this_scale;
            min = this_min;
        }
    }
    *neg_min = -min;
    return scale;
}

float fit_positive(int n, int nmax, const float* x, uint8_t* L, const float* weights) {
    float max = 0;
    for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
    if (max < 1e-15f) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = float(nmax) / max;
    for (int i = 0; i < n; ++i) L[i] = uint8_t(nearest_int(iscale * x[i]));
    const float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; ++i) {
        const float diff = x[i] - scale * float(L[i]);
        best_mse += weights[i] * diff * diff;
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * float(is) + float(nmax)) / max;
        const float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; ++i) {
            const int l = std::min(nmax, nearest_int(iscale_is * x[i]));
            const float diff = x[i] - scale_is * float(l);
            mse += weights[i] * diff * diff;
        }
        if (mse < best_mse) best_mse = mse, iscale = iscale_is;
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = std::min(nmax, nearest_int(iscale * x[i]));
        L[i] = uint8_t(l);
        sumlx += weights[i] * x[i] * float(l);
        suml2 += weights[i] * float(l) * float(l);
    }
    // Single-code moves: each pass offers every code its least-squares value given the others.
    for (int pass = 0; pass < 5; ++pass) {
        int changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = weights[i];
            float slx = sumlx - w * x[i] * float(L[i]);
            float sl2 = suml2 - w * float(L[i]) * float(L[i]);
            if (!(slx > 0 && sl2 > 0)) continue;
            const int l = std::min(nmax, nearest_int(x[i] * sl2 / slx));
            if (l == L[i]) continue;
            slx += w * x[i] * float(l);
            sl2 += w * float(l) * float(l);
            if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = uint8_t(l), sumlx = slx, suml2 = sl2;
                ++changed;
            }
        }
        if (!changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

}  // namespace ds4::quant::ggml_fit
