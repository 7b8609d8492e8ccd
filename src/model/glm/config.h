// The GLM 5.2 model configuration (GGUF architecture "glm-dsa", llama.cpp's name): every
// hyperparameter the forward pass needs, read from (and written to) GGUF metadata under
// "glm-dsa.*". Nothing is hard-coded to the published shape; glm52() only supplies its values
// as a starting point for generators and tests.
//
// The family (docs/ARCHITECTURE.md, "Model families"): absorbed MLA attention (one latent KV
// row of kv_lora + rope per token, K = the whole row, V = its first kv_lora values, no sink),
// a DSA lightning indexer that picks each token's top-k keys (some layers reuse the choice of
// the last layer that computed one), plain residuals (no hyper-connections, no compressors,
// no sliding window), leading dense SwiGLU layers, then sigmoid-gated routed experts plus
// shared experts; RMSNorm everywhere but the indexer's key LayerNorm; one RoPE without scaling.
//
// from_gguf() reads and validates every key and throws ds4::Error naming the file and key.
// Every count has the range given in [brackets] beside its field, checked at load.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gguf/value.h"

namespace ds4::gguf {
class File;
class Writer;
}  // namespace ds4::gguf

namespace ds4::glm {

inline constexpr const char* kArchitecture = "glm-dsa";
// llama.cpp's expert_gating_func value for sigmoid scoring (absent means sigmoid too).
inline constexpr uint32_t kGatingSigmoid = 2;
inline constexpr uint32_t kMaxLayers = 4096;

struct GlmConfig {
    std::string name = "GLM-5.2";   // general.name

    uint32_t n_layer = 78;          // trunk layers: block_count - nextn_predict_layers [1, kMaxLayers]
    uint32_t n_nextn = 1;           // MTP blocks after the trunk (blk.<n_layer>.nextn.*) [0, 1]
    uint32_t n_embd = 6144;         // embedding_length [1, 65536]
    uint32_t n_vocab = 154880;      // vocab_size (or the token list's length) [1, 2^24]
    uint32_t n_head = 64;           // attention.head_count [1, 4096]
    uint32_t q_lora_rank = 2048;    // attention.q_lora_rank [1, 65536]
    uint32_t kv_lora_rank = 512;    // attention.kv_lora_rank [1, 65536]
    uint32_t rope_dim = 64;         // rope.dimension_count: the tail of a query head and of the
                                    //     KV row, the head of an indexer row [2, 4096], even
    uint32_t qk_nope_dim = 192;     // key_length_mla - rope_dim: a query head's non-rope part [1, 16384]
    uint32_t v_head_dim = 256;      // attention.value_length_mla [1, 16384]
    float norm_eps = 1e-5f;         // attention.layer_norm_rms_epsilon (every RMSNorm)
    // The indexer key's LayerNorm epsilon: attention.layer_norm_epsilon when the file has it.
    // llama.cpp reads no such key for glm-dsa and uses 0; the trained model used 1e-6.
    float layer_norm_eps = 1e-6f;

    // DSA lightning indexer.
    uint32_t indexer_heads = 32;    // attention.indexer.head_count [1, 4096]
    uint32_t indexer_dim = 128;     // attention.indexer.key_length [rope_dim, 16384]
    uint32_t indexer_top_k = 2048;  // attention.indexer.top_k [1, 2^20]
    // Per trunk layer: 1 = computes its own top-k ("full"), 0 = reuses the last full layer's
    // ("shared"; it has no indexer tensors). attention.indexer.types, or llama.cpp's default
    // (below). Layer 0 must be full.
    std::vector<uint8_t> indexer_full;

    // FFN.
    uint32_t n_dense_lead = 3;      // leading_dense_block_count: dense SwiGLU layers [0, n_layer]
    uint32_t dense_ff = 12288;      // feed_forward_length (dense layers) [1, 2^18]
    uint32_t n_expert = 256;        // expert_count [1, 65536]
    uint32_t n_expert_used = 8;     // expert_used_count [1, n_expert]
    uint32_t n_expert_shared = 1;   // expert_shared_count [1, 64]
    uint32_t expert_ff = 2048;      // expert_feed_forward_length (routed and shared) [1, 2^18]
    float expert_weights_scale = 2.5f;
    bool expert_weights_norm = true;

    float rope_base = 8000000.0f;       // rope.freq_base
    uint64_t context_length = 1048576;  // context_length [1, 2^40]

    // The published GLM 5.2 configuration (78 + 1 layers, 6144 wide, 64 heads, 256 experts).
    static GlmConfig glm52();
    // llama.cpp's default indexer types when a file has none: every layer full below a trained
    // context of 2^20, else GLM 5.2's pattern (layers 0 and 1, then every 4th from layer 2,
    // within the 78 layers its table covers).
    static std::vector<uint8_t> default_indexer_types(uint32_t n_layer, uint64_t context_length);
    // Sets n_layer and the indexer types to default_indexer_types.
    void set_layer_count(uint32_t n);

    uint32_t key_dim() const { return kv_lora_rank + rope_dim; }  // K: the latent row (576)
    uint32_t value_dim() const { return kv_lora_rank; }          // V: its first kv_lora values
    uint32_t q_head_dim() const { return qk_nope_dim + rope_dim; }  // key_length_mla (256)
    bool is_dense(uint32_t layer) const { return layer < n_dense_lead; }
    bool indexer_is_full(uint32_t layer) const { return indexer_full.at(layer) != 0; }
    // The full layer whose top-k layer il uses (il itself when full).
    uint32_t indexer_source(uint32_t layer) const;

    // Internal consistency (the ranges above, array sizes); throws ds4::Error naming the
    // field's GGUF key.
    void validate() const;

    // The metadata of a GGUF of this model in writing order (general.* and glm-dsa.*, the
    // keys llama.cpp's glm-dsa reads; no tokenizer keys).
    std::vector<std::pair<std::string, gguf::Value>> metadata() const;
    void write_metadata(gguf::Writer& w) const;

    static GlmConfig from_gguf(const gguf::File& f);
};

// "glm-dsa.<suffix>"
std::string arch_key(const char* suffix);

}  // namespace ds4::glm
