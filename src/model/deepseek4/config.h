// The deepseek4 model configuration: every hyperparameter of spec/ARCHITECTURE.md §1.2 / §3.9, read
// from (and written to) GGUF metadata. Nothing here is hard-coded to the Flash shape; flash()
// only supplies the published values as a starting point for generators and tests.
//
// from_gguf() reads and validates every key and throws ds4::Error naming the file and key
// ("model.gguf: metadata key 'deepseek4.attention.head_count' ...") on anything missing, of the
// wrong type or inconsistent. write_metadata() writes the published key set of §1.2.
//
// Every count has the range given in [brackets] beside its field, checked at load: work and
// memory grow with these numbers and the kernels take them as int, so a file may not ask for
// 10^8 Sinkhorn iterations or a 2^31-token window. The ranges are far above any published
// DeepSeek V4 shape (Flash's values are the defaults below).
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

namespace ds4::deepseek4 {

inline constexpr const char* kArchitecture = "deepseek4";
// llama.cpp's enum value for sqrt(softplus) scoring; the only gating this model uses.
inline constexpr uint32_t kGatingSqrtSoftplus = 4;
// The most trunk layers a file may declare (block_count sizes the per-layer arrays).
inline constexpr uint32_t kMaxLayers = 4096;

struct ModelConfig {
    std::string name = "DeepSeek-V4-Flash";  // general.name

    // Trunk shape (§1.1 symbols in comments).
    uint32_t n_layer = 43;          // L   block_count - nextn_predict_layers [1, kMaxLayers]
    // MTP blocks stored after the trunk, llama.cpp's layout (ARCHITECTURE.md §2.4): the file's
    // block_count is n_layer + n_nextn and blk.<n_layer>... are no trunk layers (the MTP head,
    // deepseek4/mtp.h, reads them). nextn_predict_layers, absent = 0 [0, block_count - 1].
    uint32_t n_nextn = 0;
    uint32_t n_embd = 4096;         // D   embedding_length [1, 65536]
    uint32_t n_vocab = 129280;      // V   vocab_size [1, 2^24]
    uint32_t n_head = 64;           // H   attention.head_count [1, 4096]
    uint32_t n_head_kv = 1;         // H_kv (always 1: one shared KV row, MQA)
    uint32_t head_dim = 512;        // Dh  attention.key_length = attention.value_length [1, 16384]
    uint32_t rope_dim = 64;         // Dr  rope.dimension_count (the LAST rope_dim dims of a
                                    //     head) [2, head_dim], even
    uint32_t q_lora_rank = 1024;    // Rq  attention.q_lora_rank [1, 65536]
    uint32_t o_lora_rank = 1024;    // Ro  attention.output_lora_rank, per group [1, 65536]
    uint32_t o_groups = 8;          // G   attention.output_group_count [1, n_head], divides n_head
    uint32_t window = 128;          // W   attention.sliding_window (includes the current token)
                                    //     [1, 8192]

    // Lightning indexer (ratio-4 layers).
    uint32_t indexer_heads = 64;    // H_I attention.indexer.head_count [1, 4096]
    uint32_t indexer_dim = 128;     // D_I attention.indexer.key_length, a power of two (Hadamard
                                    //     rotation) [rope_dim, 16384]
    uint32_t indexer_top_k = 512;   //     attention.indexer.top_k [1, 2^20]

    // MoE.
    uint32_t n_expert = 256;        // E   expert_count [1, 65536]
    uint32_t n_expert_used = 6;     // K   expert_used_count [1, n_expert]
    uint32_t n_expert_shared = 1;   // E_sh expert_shared_count [1, 64]
    uint32_t expert_ff = 2048;      // F   expert_feed_forward_length (routed and shared) [1, 2^18]
    uint32_t n_hash_layers = 3;     // layers < n_hash_layers route by tid2eid[token]
                                    //     hash_layer_count [0, n_layer]
    float expert_weights_scale = 1.5f;
    bool expert_weights_norm = true;

    // Hyper-connections.
    uint32_t hc = 4;                // HC streams: hyper_connection.count [1, 64]
    uint32_t sinkhorn_iters = 20;   // T_sk hyper_connection.sinkhorn_iterations [1, 1000]
    float hc_eps = 1e-6f;

    float norm_eps = 1e-6f;         // every RMSNorm

    // RoPE: plain base for ratio-0 layers; compressed layers use compress_rope_base + YaRN.
    float rope_base = 10000.0f;
    float compress_rope_base = 160000.0f;
    float yarn_factor = 16.0f;
    uint64_t yarn_orig_ctx = 65536;  // rope.scaling.original_context_length [1, 2^40]
    float yarn_beta_fast = 32.0f;
    float yarn_beta_slow = 1.0f;

    uint64_t context_length = 1048576;  // context_length [1, 2^40]

    // Per trunk layer (size n_layer). Ratios are 0, 4 or 128. Files carry n_layer + n_nextn
    // entries (at least n_layer + 1 ratios: the HF config lists the MTP block's 0 even without
    // one); the MTP blocks' entries are not kept here (0 and the trunk's clamp when written).
    std::vector<uint32_t> compress_ratios;
    std::vector<float> swiglu_clamp_exp;    // routed experts
    std::vector<float> swiglu_clamp_shexp;  // shared expert (files may omit: = exp)

    // The published Flash configuration (§1.1): 43 layers, ratio schedule 0,0,4,128,4,…,4.
    static ModelConfig flash();
    // The published V4 PRO configuration (spec/ARCHITECTURE.md §1.3): 61 layers, 7168 wide,
    // 128 heads in 16 groups, 384 experts x 3072, indexer top-k 1024, routed scale 2.5,
    // ratio schedule 128,128,4,128,4,…,4.
    static ModelConfig pro();
    // A per-layer ratio schedule, usable for any layer count.
    using RatioSchedule = uint32_t (*)(uint32_t layer);
    // Flash: 0 for i < 2, then 4 for even and 128 for odd layers.
    static uint32_t flash_ratio(uint32_t layer);
    // PRO: 128 for i < 2, then 4 for even and 128 for odd layers (no ratio-0 trunk layer).
    static uint32_t pro_ratio(uint32_t layer);
    // Sets n_layer and resizes the per-layer arrays: ratios follow `schedule`, clamps keep
    // the value of layer 0 (10 when empty).
    void set_layer_count(uint32_t n, RatioSchedule schedule = flash_ratio);

    uint32_t compress_ratio(uint32_t layer) const { return compress_ratios.at(layer); }
    bool is_hash_layer(uint32_t layer) const { return layer < n_hash_layers; }
    uint32_t hc_dim() const { return hc * n_embd; }          // flattened HC state
    uint32_t hc_mix() const { return (2 + hc) * hc; }        // pre + post + comb mixes
    uint32_t nope_dim() const { return head_dim - rope_dim; }

    // Internal consistency (divisibility, the ranges above, array sizes); throws ds4::Error
    // with the offending field named by its GGUF key and the value it should have.
    void validate() const;

    // The metadata of a GGUF file of this model, in writing order (general.* and the
    // deepseek4.* keys of §1.2; no tokenizer keys). write_metadata() sets exactly these.
    std::vector<std::pair<std::string, gguf::Value>> metadata() const;
    void write_metadata(gguf::Writer& w) const;

    // Reads and validates the model keys of a deepseek4 GGUF.
    static ModelConfig from_gguf(const gguf::File& f);
};

// "deepseek4.<suffix>"
std::string arch_key(const char* suffix);

}  // namespace ds4::deepseek4
