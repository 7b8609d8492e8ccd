#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "quant/quant.h"

namespace ds4::quant {
namespace {

uint64_t xgetbv0() {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t(hi) << 32) | lo;
}

struct Features {
    bool avx2 = false, avx512vnni = false;
    Features() {
        unsigned a, b, c, d;
        if (!__get_cpuid(1, &a, &b, &c, &d)) return;
        const bool osxsave = c & bit_OSXSAVE, fma = c & bit_FMA, f16c = c & bit_F16C;
        if (!osxsave) return;
        const uint64_t xcr0 = xgetbv0();
        const bool os_avx = (xcr0 & 0x6) == 0x6;            // XMM + YMM state
        const bool os_avx512 = (xcr0 & 0xe6) == 0xe6;       // + opmask, ZMM state
        if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
        const bool bmi2 = b & bit_BMI2;
        avx2 = os_avx && (b & bit_AVX2) && fma && f16c && bmi2;
        avx512vnni = avx2 && os_avx512 && (b & bit_AVX512F) && (b & bit_AVX512BW) &&
                     (b & bit_AVX512VL) && (b & bit_AVX512DQ) && (c & bit_AVX512VNNI);
    }
};

const Features& features() {
    static const Features f;
    return f;
}

}  // namespace

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::Scalar: return "scalar";
        case Isa::Avx2: return "avx2";
        case Isa::Avx512Vnni: return "avx512";
    }
    return "?";
}

bool isa_supported(Isa isa) {
    switch (isa) {
        case Isa::Scalar: return true;
        case Isa::Avx2: return features().avx2;
        case Isa::Avx512Vnni: return features().avx512vnni;
    }
    return false;
}

namespace {
std::atomic<int> g_isa_cap{kIsaCount - 1};
}  // namespace

void set_isa_cap(Isa cap) { g_isa_cap.store(int(cap)); }

Isa best_isa() {
    static const Isa best = [] {
        Isa isa = Isa::Scalar;
        if (isa_supported(Isa::Avx2)) isa = Isa::Avx2;
        if (isa_supported(Isa::Avx512Vnni)) isa = Isa::Avx512Vnni;
        if (const char* cap = std::getenv("DS4_ISA")) {  // lets tests and users pin a path
            for (int i = 0; i < kIsaCount; ++i)
                if (std::strcmp(cap, isa_name(Isa(i))) == 0 && i < int(isa)) isa = Isa(i);
        }
        return isa;
    }();
    return Isa(std::min(int(best), g_isa_cap.load(std::memory_order_relaxed)));
}

}  // namespace ds4::quant
