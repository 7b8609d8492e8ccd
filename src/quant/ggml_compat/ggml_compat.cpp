// The ggml compatibility switch (quant.h), and each format's compat kernel (ggml_compat.h) from
// its FormatOps record.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "quant/ggml_compat/ggml_compat.h"
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
    const FormatOps* ops = format_ops(w);
    return ops ? ops->ggml_compat : nullptr;
}

}  // namespace ds4::quant
