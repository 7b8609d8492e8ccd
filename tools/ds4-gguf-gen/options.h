// What to generate: a preset plus per-field overrides (command-line flags), resolved into a
// validated ModelConfig and a per-class type recipe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/deepseek4/config.h"
#include "model/deepseek4/layout.h"
#include "sparse_fill.h"

namespace ds4::gen {

struct Overrides {
    std::optional<uint32_t> layers, hash_layers, embd, vocab, heads, head_dim, rope_dim, q_rank,
        o_rank, o_groups, experts, experts_used, shared_experts, ff, indexer_heads, indexer_dim,
        indexer_top_k, window, hc;
    std::optional<uint64_t> ctx;
    std::optional<std::vector<uint32_t>> ratios;
    std::vector<std::string> types;  // "CLASS=TYPE", applied in order
};

struct GenPlan {
    std::string preset;
    deepseek4::ModelConfig cfg;
    deepseek4::TypeRecipe types;
    uint64_t seed = 1;
    bool real_vocab = false;
    std::string tokenizer_json;  // used when real_vocab
    bool sparse = false;
    bool exact_quant = false;  // run the reference quantizer for K/IQ formats too
    int threads = 1;
    // MTP heads (mtp.h): in the main file (cfg.n_nextn = 1) and/or a support file.
    bool mtp_embedded = false;
    std::string mtp_out;
    // With sparse: what is written anyway (sparse_fill.h).
    SparseFill fill;
};

// Known presets: "tiny", "small", "flash", "pro".
const std::vector<std::string>& preset_names();

// Preset + overrides -> validated plan. Errors (unknown preset/class/type, an inconsistent
// shape, a type whose block size does not divide a tensor's rows) throw ds4::Error.
GenPlan make_plan(const std::string& preset, const Overrides& ov, uint64_t seed, bool real_vocab,
                  bool sparse);

// Human-readable summary: shape, layer schedule, types, tensor count and file size.
std::string describe(const GenPlan& plan);

// Writes the model file (and the MTP support file of plan.mtp_out); returns the model file's
// size in bytes. Progress goes to `log` if non-null.
uint64_t generate(const GenPlan& plan, const std::string& out_path, std::FILE* log);

}  // namespace ds4::gen
