// ds4-gguf-gen --arch glm-dsa: random GLM 5.2 (llama.cpp's glm-dsa) GGUFs of any shape and type
// mix, with the metadata (glm::GlmConfig::metadata), tensors (glm::tensor_layout, mtp_layout)
// and a glm4-style tokenizer (glm_vocab.h) that llama.cpp's glm-dsa loader accepts.
//
// Weights (per tensor row, one random stream keyed by seed, tensor name and row, rng.h):
//   matrices                      N(0, 1/fan_in), fan_in = ne[0]: every product of a
//                                 unit-RMS input lands at O(1), through any number of layers
//   token_embd                    N(0, 1)
//   *norm.weight                  1 + 0.1 N
//   indexer.k_norm.bias           0.1 N
//   exp_probs_b.bias              0.1 N (moves expert selection a little, never dominates)
// K/IQ formats with random blocks (random_blocks.h) are drawn directly unless exact_quant.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "gguf/tensor_type.h"
#include "model/glm/config.h"
#include "model/glm/layout.h"

namespace ds4::gen {

// The storage type of each glm::TensorClass (Norm is always F32).
using GlmTypes = std::array<TensorType, glm::kTensorClassCount>;

struct GlmOverrides {
    std::optional<uint32_t> layers, embd, vocab, heads, q_lora, kv_lora, nope, rope_dim, v_head, experts,
        experts_used, shared_experts, ff, dense_lead, dense_ff, indexer_heads, indexer_dim, indexer_top_k;
    std::optional<uint64_t> ctx;
    std::optional<float> indexer_ln_eps;
    std::optional<std::vector<uint8_t>> indexer_types;  // 1 = full, 0 = shared, one per layer
    std::vector<std::string> types;                     // "CLASS=TYPE", applied in order
};

struct GlmPlan {
    std::string preset;
    glm::GlmConfig cfg;  // cfg.n_nextn = 1 with the MTP block
    GlmTypes types{};
    uint64_t seed = 1;
    bool sparse = false;
    bool exact_quant = false;
    int threads = 1;

    TensorType type_of(glm::TensorClass c) const {
        return c == glm::TensorClass::Norm ? TensorType::F32 : types[size_t(c)];
    }
};

// "tiny", "glm52".
const std::vector<std::string>& glm_preset_names();

// Preset + overrides -> validated plan (GlmConfig::validate, then every tensor's rows hold
// whole blocks of its class's type). `mtp`: with the embedded MTP block. Throws ds4::Error.
GlmPlan make_glm_plan(const std::string& preset, const GlmOverrides& ov, uint64_t seed, bool sparse, bool mtp);

// Shapes llama.cpp's glm-dsa cannot run (the oracle): one line each, empty if none.
std::vector<std::string> glm_oracle_warnings(const glm::GlmConfig& c);

// Human-readable summary: shape, indexer layer pattern, types, tensor count and size.
std::string describe_glm(const GlmPlan& p);

// Writes the model file; returns its size in bytes. Progress goes to `log` if non-null.
uint64_t generate_glm(const GlmPlan& p, const std::string& out_path, std::FILE* log);

// The command line of `ds4-gguf-gen --arch glm-dsa` (main.cpp hands over when it sees it).
int glm_main(int argc, char** argv);

}  // namespace ds4::gen
