// The ggml compatibility switch (quant.h) and the table of compat kernels (ggml_compat.h).
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "quant/ggml_compat.h"
#include "quant/quant.h"

namespace ds4::quant {
namespace {

std::atomic<bool>& compat_flag() {
    static std::atomic<bool> flag{[] {
        const char* env = std::getenv("DS4_GGML_COMPAT");
        return env && std::strcmp(env, "1") == 0;
    }()};
    return flag;
}

}  // namespace

void set_ggml_compat(bool on) { compat_flag().store(on); }
bool ggml_compat() { return compat_flag().load(std::memory_order_relaxed); }

DotFn compat::dot_kernel(TensorType w) {
    switch (w) {
        case TensorType::F32: return &dot_f32;
        case TensorType::F16: return &dot_f16;
        case TensorType::BF16: return &dot_bf16;
        case TensorType::Q8_0: return &dot_q8_0;
        case TensorType::Q2_K: return &dot_q2_k;
        case TensorType::Q4_K: return &dot_q4_k;
        case TensorType::IQ2_XXS: return &dot_iq2_xxs;
        case TensorType::MXFP4: return &dot_mxfp4;
        default: return nullptr;
    }
}

}  // namespace ds4::quant
