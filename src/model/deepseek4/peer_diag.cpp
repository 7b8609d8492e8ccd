#include "model/deepseek4/peer_diag.h"

#include <cstdlib>

#include "common/error.h"
#include "common/half.h"

namespace ds4::deepseek4 {
namespace {

PeerDiag& current() {
    static PeerDiag d = [] {
        const char* env = std::getenv("DS4_PEER_DIAG");
        return env ? parse_peer_diag(env) : PeerDiag{};
    }();
    return d;
}

}  // namespace

const PeerDiag& peer_diag() { return current(); }

void set_peer_diag(const PeerDiag& d) { current() = d; }

PeerDiag parse_peer_diag(std::string_view list) {
    PeerDiag d;
    while (!list.empty()) {
        const size_t comma = list.find(',');
        const std::string_view name = list.substr(0, comma);
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
        if (name.empty()) continue;
        if (name == "kv_f16") {
            d.kv_f16 = true;
        } else if (name == "router_f32") {
            d.router_f32 = true;
        } else {
            fail("DS4_PEER_DIAG: unknown switch '{}' (known: kv_f16, router_f32)", name);
        }
    }
    return d;
}

void round_to_f16(float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] = f16_to_f32(f32_to_f16(x[i]));
}

void matmul_f16_f32_act(const uint8_t* W, size_t row_bytes, int64_t rows, int64_t cols, const float* x, int64_t n,
                        float* y) {
    for (int64_t t = 0; t < n; ++t)
        for (int64_t r = 0; r < rows; ++r) {
            const auto* w = reinterpret_cast<const uint16_t*>(W + size_t(r) * row_bytes);
            float acc = 0.0f;
            for (int64_t i = 0; i < cols; ++i) acc += f16_to_f32(w[i]) * x[t * cols + i];
            y[t * rows + r] = acc;
        }
}

}  // namespace ds4::deepseek4
