// Diagnostic switches for the upstream peer check (docs/PEER_CHECK.md): each makes our forward
// pass imitate one precision choice of upstream ds4's CPU path, so the check can measure how
// much of the difference that choice accounts for. All are off by default, and off they change
// nothing (bit-identical logits; the cost is one test of a flag per stored row). Not a user
// feature: the oracle tests hold the default arithmetic to llama.cpp's.
//
// The environment variable DS4_PEER_DIAG (read once, at the first query) names the switches to
// turn on, comma separated; an unknown name fails that first query.
//   kv_f16      every KV row the attention stores (raw, compressed and the indexer's
//               compressed rows) rounded to f16 after its QAT round trip, as upstream's cache
//               stores them
//   router_f32  the router's F16 product with f32 activations (upstream's matvec_any; ours,
//               as ggml, rounds the activations to f16 first)
#pragma once

#include <cstdint>
#include <string_view>

namespace ds4::deepseek4 {

struct PeerDiag {
    bool kv_f16 = false;
    bool router_f32 = false;
};

// The switches in effect (from DS4_PEER_DIAG unless set_peer_diag was called).
const PeerDiag& peer_diag();
// Replaces them (tests; not while a forward pass runs).
void set_peer_diag(const PeerDiag& d);
// Parses a DS4_PEER_DIAG value; fails on an unknown name.
PeerDiag parse_peer_diag(std::string_view list);

// Rounds x[0..n) to the nearest f16 value (ties to even), in place.
void round_to_f16(float* x, int64_t n);
// y[t][r] = sum_i W[r][i] x[t][i] for an F16 W [rows][cols] and f32 x [n][cols], the sum in
// f32 in index order (router_f32).
void matmul_f16_f32_act(const uint8_t* W, size_t row_bytes, int64_t rows, int64_t cols, const float* x, int64_t n,
                        float* y);

}  // namespace ds4::deepseek4
