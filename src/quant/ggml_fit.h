// The scale fits of ggml's reference quantizers (ggml-quants.c), for the formats whose files we
// write bit for bit as llama.cpp's quantizer would (Q4_0, Q5_K, Q6_K): the same float
// operations in the same order, so the same codes and scales come out of the same input.
// tests/oracle/quant_{q4_0,q5_k,q6_k}_oracle_test.cpp hold the blocks byte-identical.
#pragma once

#include <bit>
#include <cstdint>

namespace ds4::quant::ggml_fit {

// ggml's nearest_int: round to nearest, ties to even, through the float adder (x + 1.5 * 2^23
// leaves the integer in the low mantissa bits). Exact for |x| < 2^22; defined (if meaningless)
// for every other input, NaN included, as ggml's is.
inline int nearest_int(float x) {
    const float v = x + 12582912.f;
    return int(std::bit_cast<uint32_t>(v) & 0x007fffffu) - 0x00400000;
}

// Symmetric codes: L_i = clamp(round(x_i / scale), -nmax, nmax - 1) + nmax; returns scale.
// The scale is the least-squares fit for the weights w_i (qw, or x_i^2 when qw is null) after
// a search over 19 candidate inverse scales -(nmax + 0.1 k) / max, k = -9..9 (ggml's
// make_qx_quants with rmse_type 1). All-zero input (|x| < 1e-15): codes 0 (not nmax), scale 0.
float fit_symmetric(int n, int nmax, const float* x, int8_t* L, const float* qw);

// Codes with a min: L_i = clamp(round((x_i - min) / scale), 0, nmax); returns scale and writes
// -min (min <= 0). The least-squares (scale, min) over the weights, after a search of nstep + 1
// candidate inverse scales (rmin + rdelta k + nmax) / (max - min) by weighted squared error, or
// by weighted absolute error when use_mad (ggml's make_qkx2_quants; with non-null weights also
// its make_qkx3_quants, whose only difference is the x^2 default). nstep < 1: the first fit
// (inverse scale nmax / (max - min)) as it is. n <= 256.
float fit_with_min(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                   float* neg_min, float rmin, float rdelta, int nstep, bool use_mad = false);

// Non-negative values onto codes 0..nmax with one positive scale (ggml's make_qp_quants: the
// K-quants' scales and mins under an importance matrix): a search of 9 inverse scales
// (nmax + 0.1 k) / max, then up to 5 passes that move single codes while the weighted fit
// improves; returns the least-squares scale. All values < 1e-15: codes 0, scale 0. Codes are
// written as ggml does, through uint8_t (a value above max cannot occur: max is the largest).
float fit_positive(int n, int nmax, const float* x, uint8_t* L, const float* weights);

}  // namespace ds4::quant::ggml_fit
