// Captures llama.cpp's discrete decisions while it runs a deepseek4 or glm-dsa model: the routed
// experts chosen per layer and token, and the rows the lightning indexer selects. Works through
// the scheduler's eval callback (llama_context_params::cb_eval), which sees every graph node by
// the name llama.cpp's graph builder gave it ("<name>-<layer>").
//
// Tensors read (names from the bundled src/models/deepseek4.cpp, glm-dsa.cpp, llama-graph.cpp):
//   ffn_moe_topk-<il>      I32 [n_expert_used, n_tokens]  chosen experts, best first (biased
//                          top-k; on hash layers the tid2eid row of the token)
// deepseek4 (ratio-4 layers are the only ones with an indexer):
//   lid_top_k-<il>         I32 [n_top_k, n_tokens]        indexer picks (compressed-row ids),
//                          over a row padded to >= 256 slots, so it includes masked slots
//   lid_score_masked-<il>  F32 [n_slots, n_tokens]        indexer scores with -inf on slots the
//                          token cannot see; used to drop the masked picks
// glm-dsa (layers whose attention.indexer.types entry is 1):
//   indexer_score-<il>     F32 [n_kv, n_tokens]           the last 2-D node of that name in a
//                          layer is the masked score (fused lightning-indexer op, or the unfused
//                          chain's final add of the mask); earlier ones are overwritten
//   top_k-<il'>            I32 [n_top_k, n_tokens]        KV-cell picks. Every shared layer that
//                          reuses the tensor renames it (cb(top_k, "top_k", il)), so il' is the
//                          LAST shared layer after the full one: the picks are paired with the
//                          latest indexer_score capture and filed under its (full) layer
//
// Every llama_decode must be a single ubatch (n_ubatch >= batch size) of one sequence with
// consecutive positions, so that column i of a captured tensor is position first_pos + i.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

struct ggml_tensor;

namespace ds4::oracle {

class RouteCapture {
public:
    // glm: read glm-dsa's indexer node names (above) instead of deepseek4's.
    RouteCapture(bool experts, bool indexer, bool glm = false) : experts_(experts), indexer_(indexer), glm_(glm) {}

    // Positions of the tokens of the next llama_decode: first_pos .. first_pos + n_tokens - 1.
    void begin_batch(int64_t first_pos, int64_t n_tokens);

    // The ggml_backend_sched_eval_callback; user_data is the RouteCapture.
    static bool eval_callback(ggml_tensor* t, bool ask, void* user_data);

    // Text dumps, one line per (layer, position), sorted by layer then position:
    //   "<layer> <pos> <id> <id> ..."
    // experts: ids in llama.cpp's order (descending selection score); indexer: the selected
    // visible ids in ascending order (empty when no row is visible yet): compressed rows for
    // deepseek4, positions for glm-dsa (the KV cells of the one sequence, filled from cell 0).
    void write_experts(const std::string& path) const;
    void write_indexer(const std::string& path) const;

    // A decode failed inside the callback (bad shape, unexpected type): the message.
    const std::string& error() const { return error_; }

private:
    using Key = std::pair<int, int64_t>;  // (layer, position)
    bool wants(const ggml_tensor* t) const;
    bool observe(const ggml_tensor* t);
    void take_indexer_picks(int layer);

    bool experts_;
    bool indexer_;
    bool glm_;
    int last_score_layer_ = -1;  // glm-dsa: the layer of the latest indexer_score capture
    int64_t first_pos_ = 0;
    int64_t n_tokens_ = 0;
    std::string error_;
    std::map<Key, std::vector<int32_t>> experts_by_pos_;
    std::map<Key, std::vector<int32_t>> indexer_by_pos_;
    // The scores and picks of one layer arrive as two callbacks; the first waits for the other.
    std::map<int, std::vector<std::vector<float>>> pending_scores_;   // layer -> [token][slot]
    std::map<int, std::vector<std::vector<int32_t>>> pending_picks_;  // layer -> [token][k]
};

}  // namespace ds4::oracle
