// IQ2_XXS x Q8_K dot, AVX-512 VNNI, in the group-lane step order of iq2_xxs_step_avx512.h (the
// activation is reordered per call; the multi-row kernel does that once for all rows). The
// weight side of each block comes from a decoder: AVX512-VBMI vector lookups where the CPU has
// them (iq2_xxs_vbmi_avx512.cpp), else eight 8-byte codebook loads per step. Per step a masked
// subtract negates activation bytes and vpdpbusd (u8 magnitude <= 43 x s8) accumulates; one
// vpmulld per pair of blocks applies the groups' 2l+1.
#include "quant/x86_simd.h"  // first: see there

#include <vector>

#include "quant/iq2_xxs/iq2_xxs.h"
#include "quant/iq2_xxs/iq2_xxs_step_avx512.h"
#include "quant/iq2_xxs/iq2_xxs_vbmi.h"

namespace ds4::quant {

float dot_iq2_xxs_q8_k_avx512(int64_t n, const void* w, const void* act) {
    if (iq2xxs_vbmi_active()) return dot_iq2_xxs_q8_k_vbmi(n, w, act);
    static const Iq2xxsLookupDecoder dec;
    const int64_t nb = n / kQK_K;
    thread_local std::vector<Iq2xxsActBlock> ordered;
    if (ordered.size() < size_t(nb)) ordered.resize(size_t(nb));
    iq2xxs_order_act(nb, static_cast<const BlockQ8_K*>(act), ordered.data());
    return iq2xxs_dot_ordered(dec, nb, static_cast<const BlockIQ2_XXS*>(w), ordered.data());
}

}  // namespace ds4::quant
