#include "quant/kquant_fit.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/half.h"
#include "quant/round_clamp.h"

namespace ds4::quant {
namespace {

constexpr float kF16Max = 65504.f;

// Weighted sums of one sub-block that the least-squares fits reuse.
struct Moments {
    double sw = 0, sx = 0, sxx = 0;
};

struct AffineFit {
    float scale = 0, min = 0;  // value = scale * q - min
    double err = 0;
};

// Least-squares (scale, offset) for fixed codes L: minimises sum w (scale*L + off - x)^2 with
// off <= 0 (the formats store a non-negative min that is subtracted). False if degenerate.
bool solve_affine(const float* x, const float* w, const uint8_t* L, int n, const Moments& mo,
                  AffineFit* out) {
    double sl = 0, sl2 = 0, sxl = 0;
    for (int i = 0; i < n; ++i) {
        const double wl = double(w[i]) * L[i];
        sl += wl;
        sl2 += wl * L[i];
        sxl += wl * x[i];
    }
    double a, b;
    const double det = mo.sw * sl2 - sl * sl;
    if (det > 0) {
        a = (mo.sw * sxl - mo.sx * sl) / det;
        b = (sl2 * mo.sx - sl * sxl) / det;
        if (b > 0) {
            b = 0;
            a = sxl / sl2;
        }
    } else if (sl2 > 0) {
        b = 0;
        a = sxl / sl2;
    } else {
        return false;
    }
    if (!(a > 0)) return false;
    out->scale = float(a);
    out->min = float(-b);
    out->err = mo.sxx - 2 * a * sxl - 2 * b * mo.sx + a * a * sl2 + 2 * a * b * sl + b * b * mo.sw;
    return true;
}

// Continuous (scale, min) for one sub-block: a sweep of code grids spanning [min(x,0), max x]
// with a least-squares solve for each, then re-rounding passes from the best solution.
AffineFit fit_subblock(const float* x, const float* w, int n, int nmax, uint8_t* L) {
    Moments mo;
    float lo = x[0], hi = x[0];
    for (int i = 0; i < n; ++i) {
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
        mo.sw += w[i];
        mo.sx += double(w[i]) * x[i];
        mo.sxx += double(w[i]) * x[i] * x[i];
    }
    lo = std::min(lo, 0.f);
    AffineFit best;
    if (!(hi > lo) || !std::isfinite(hi - lo)) {
        std::memset(L, 0, size_t(n));
        best.min = std::isfinite(lo) ? -lo : 0.f;
        return best;
    }
    best.scale = (hi - lo) / float(nmax);
    best.min = -lo;
    best.err = 0;
    for (int i = 0; i < n; ++i) {
        L[i] = uint8_t(round_clamp((x[i] - lo) / best.scale, 0, nmax));
        const double e = double(best.scale) * L[i] - best.min - x[i];
        best.err += w[i] * e * e;
    }
    uint8_t cand[32];
    AffineFit f;
    for (int step = 0; step <= 20; ++step) {  // grids of nmax-1 .. nmax+1 steps over the range
        const float iscale = (float(nmax) - 1.f + 0.1f * float(step)) / (hi - lo);
        for (int i = 0; i < n; ++i)
            cand[i] = uint8_t(round_clamp(iscale * (x[i] - lo), 0, nmax));
        if (solve_affine(x, w, cand, n, mo, &f) && f.err < best.err) {
            best = f;
            std::memcpy(L, cand, size_t(n));
        }
    }
    for (int pass = 0; pass < 4; ++pass) {  // re-round to the fitted grid, refit
        bool changed = false;
        for (int i = 0; i < n; ++i) {
            cand[i] = uint8_t(round_clamp((x[i] + best.min) / best.scale, 0, nmax));
            changed |= cand[i] != L[i];
        }
        if (!changed || !solve_affine(x, w, cand, n, mo, &f) || !(f.err < best.err)) break;
        best = f;
        std::memcpy(L, cand, size_t(n));
    }
    return best;
}

uint16_t to_f16_scale(double v) {
    if (!(v > 0)) return 0;
    return f32_to_f16(float(std::min(v, double(kF16Max))));
}

struct SuperFit {
    const float* x;
    const float* w;
    KQuantShape shape;
    int nsub;
    float a[16], m[16];  // continuous per-sub-block scale and min
};

// Error of the block for the given d/dmin when every sub-block takes its best integer
// (sc, mn) among the 2*radius candidates each around its continuous (scale, min); fills out.
double evaluate(const SuperFit& s, uint16_t d16, uint16_t dm16, KQuantBlock* out,
                int radius = 1) {
    const float d = f16_to_f32(d16), dm = f16_to_f32(dm16);
    const int len = s.shape.sub_len, qmax = s.shape.code_max, smax = s.shape.scale_max;
    out->d = d16;
    out->dmin = dm16;
    double total = 0;
    for (int j = 0; j < s.nsub; ++j) {
        const float* x = s.x + j * len;
        const float* w = s.w + j * len;
        int sc_lo = 0, mn_lo = 0, sc_hi = 0, mn_hi = 0;
        if (d > 0) {
            const int f = round_clamp(std::floor(s.a[j] / d), 0, smax);
            sc_lo = std::max(0, f + 1 - radius);
            sc_hi = std::min(smax, f + radius);
        }
        if (dm > 0) {
            const int f = round_clamp(std::floor(s.m[j] / dm), 0, smax);
            mn_lo = std::max(0, f + 1 - radius);
            mn_hi = std::min(smax, f + radius);
        }
        double best = INFINITY;
        uint8_t q[32], best_q[32] = {};
        out->sc[j] = uint8_t(sc_lo);
        out->mn[j] = uint8_t(mn_lo);
        for (int sc = sc_lo; sc <= sc_hi; ++sc) {
            for (int mn = mn_lo; mn <= mn_hi; ++mn) {
                const float A = d * float(sc), M = dm * float(mn);  // as dequantization does
                const float iA = A > 0 ? 1.f / A : 0.f;
                float err = 0;
                for (int i = 0; i < len; ++i) {
                    q[i] = uint8_t(round_clamp((x[i] + M) * iA, 0, qmax));
                    const float e = A * float(q[i]) - M - x[i];
                    err += w[i] * e * e;
                }
                if (err < best) {
                    best = err;
                    out->sc[j] = uint8_t(sc);
                    out->mn[j] = uint8_t(mn);
                    std::memcpy(best_q, q, size_t(len));
                }
            }
        }
        std::memcpy(out->q + j * len, best_q, size_t(len));
        total += best;
    }
    return total;
}

// Least-squares d/dmin for the integer codes and scales of b.
bool refit_scales(const SuperFit& s, const KQuantBlock& b, double* d, double* dm) {
    double suu = 0, suv = 0, svv = 0, sux = 0, svx = 0;
    for (int i = 0; i < 256; ++i) {
        const int j = i / s.shape.sub_len;
        const double u = double(b.sc[j]) * b.q[i], v = b.mn[j], w = s.w[i];
        suu += w * u * u;
        suv += w * u * v;
        svv += w * v * v;
        sux += w * u * s.x[i];
        svx += w * v * s.x[i];
    }
    // minimise sum w (d*u - dm*v - x)^2
    const double det = suv * suv - suu * svv;
    if (det != 0) {
        *d = (suv * svx - svv * sux) / det;
        *dm = (suu * svx - suv * sux) / det;
        if (*dm < 0) {
            *dm = 0;
            *d = suu > 0 ? sux / suu : 0;
        }
    } else if (suu > 0) {
        *dm = 0;
        *d = sux / suu;
    } else {
        return false;
    }
    return *d >= 0;
}

}  // namespace

KQuantBlock fit_kquant_superblock(const float* x, const float* w_in, const KQuantShape& shape) {
    SuperFit s;
    s.shape = shape;
    s.nsub = 256 / shape.sub_len;
    float xbuf[256];  // non-finite inputs count as 0 so they cannot poison the fits
    for (int i = 0; i < 256; ++i) xbuf[i] = std::isfinite(x[i]) ? x[i] : 0.f;
    x = xbuf;
    s.x = x;
    float ones[256];
    float wbuf[256];
    if (!w_in) {
        std::fill(ones, ones + 256, 1.f);
        w_in = ones;
    }
    // A sub-block whose weights are all zero contributes no error; fit it unweighted so its
    // codes stay sensible.
    std::memcpy(wbuf, w_in, sizeof(wbuf));
    for (int j = 0; j < s.nsub; ++j) {
        float* w = wbuf + j * shape.sub_len;
        bool any = false;
        for (int i = 0; i < shape.sub_len; ++i) {
            if (!(w[i] >= 0) || !std::isfinite(w[i])) w[i] = 0;
            any |= w[i] > 0;
        }
        if (!any) std::fill(w, w + shape.sub_len, 1.f);
    }
    s.w = wbuf;

    KQuantBlock best{};
    float max_a = 0, max_m = 0;
    for (int j = 0; j < s.nsub; ++j) {
        const AffineFit f = fit_subblock(x + j * shape.sub_len, s.w + j * shape.sub_len,
                                         shape.sub_len, shape.code_max, best.q + j * shape.sub_len);
        s.a[j] = f.scale;
        s.m[j] = f.min;
        max_a = std::max(max_a, f.scale);
        max_m = std::max(max_m, f.min);
    }
    const double d0 = double(max_a) / shape.scale_max, m0 = double(max_m) / shape.scale_max;
    double best_err = evaluate(s, to_f16_scale(d0), to_f16_scale(m0), &best);
    KQuantBlock cand{};
    // A coarse 1-D search on d (then dmin): shrinking d lets sub-block scales round up
    // instead of down, which matters with 4-bit scales.
    for (int k = -4; k <= 2; ++k) {
        if (k == 0) continue;
        const double e = evaluate(s, to_f16_scale(d0 * (1 + 0.05 * k)), best.dmin, &cand);
        if (e < best_err) best_err = e, best = cand;
    }
    for (int k = -4; k <= 2; ++k) {
        if (k == 0) continue;
        const double e = evaluate(s, best.d, to_f16_scale(m0 * (1 + 0.05 * k)), &cand);
        if (e < best_err) best_err = e, best = cand;
    }
    for (int pass = 0; pass < 3; ++pass) {
        double d, dm;
        if (!refit_scales(s, best, &d, &dm)) break;
        const double e = evaluate(s, to_f16_scale(d), to_f16_scale(dm), &cand);
        if (!(e < best_err)) break;
        best_err = e, best = cand;
    }
    // Final pass: a wider (sc, mn) window for every sub-block at the chosen d/dmin.
    const double e = evaluate(s, best.d, best.dmin, &cand, 2);
    if (e < best_err) best = cand;
    return best;
}

}  // namespace ds4::quant
