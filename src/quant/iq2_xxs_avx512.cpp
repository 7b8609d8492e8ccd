// IQ2_XXS x Q8_K dot, AVX-512 VNNI: 64 values (two groups) per step; the weight side of each
// block comes from a decoder (iq2_xxs_step_avx512.h): AVX512-VBMI vector lookups where the CPU
// has them (iq2_xxs_vbmi_avx512.cpp), else eight 8-byte codebook loads per step with the sign
// bits built by pdep. Per step a masked subtract negates activation bytes, vpmaddubsw (u8
// magnitude <= 43 x s8, pairs in i16) and vpdpwssd with the groups' 2l+1 accumulate in i32.
// Measured on one core, weights in L2: 6.9 GB/s with the lookups, 8.3 with VBMI (the lookup
// version was 5.4 with per-step scale broadcasts and 5.0 with a gather).
#include "quant/x86_simd.h"  // first: see there

#include "quant/iq2_xxs.h"
#include "quant/iq2_xxs_step_avx512.h"
#include "quant/iq2_xxs_vbmi.h"

namespace ds4::quant {

float dot_iq2_xxs_q8_k_avx512(int64_t n, const void* w, const void* act) {
    if (iq2xxs_vbmi_active()) return dot_iq2_xxs_q8_k_vbmi(n, w, act);
    static const Iq2xxsLookupDecoder dec;
    return iq2xxs_dot(dec, n, w, act);
}

}  // namespace ds4::quant
