// Captures llama.cpp's discrete decisions while it runs a deepseek4 model: the routed experts
// chosen per layer and token, and the compressed rows the lightning indexer selects. Works
// through the scheduler's eval callback (llama_context_params::cb_eval), which sees every graph
// node by the name llama.cpp's graph builder gave it ("<name>-<layer>").
//
// Tensors read (names from the bundled src/models/deepseek4.cpp and src/llama-graph.cpp):
//   ffn_moe_topk-<il>      I32 [n_expert_used, n_tokens]  chosen experts, best first (biased
//                          top-k; on hash layers the tid2eid row of the token)
//   lid_top_k-<il>         I32 [n_top_k, n_tokens]        indexer picks (compressed-row ids),
//                          over a row padded to >= 256 slots, so it includes masked slots
//   lid_score_masked-<il>  F32 [n_slots, n_tokens]        indexer scores with -inf on slots the
//                          token cannot see; used to drop the masked picks
// Ratio-4 (CSA) layers are the only ones with an indexer.
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
    RouteCapture(bool experts, bool indexer) : experts_(experts), indexer_(indexer) {}

    // Positions of the tokens of the next llama_decode: first_pos .. first_pos + n_tokens - 1.
    void begin_batch(int64_t first_pos, int64_t n_tokens);

    // The ggml_backend_sched_eval_callback; user_data is the RouteCapture.
    static bool eval_callback(ggml_tensor* t, bool ask, void* user_data);

    // Text dumps, one line per (layer, position), sorted by layer then position:
    //   "<layer> <pos> <id> <id> ..."
    // experts: ids in llama.cpp's order (descending selection score); indexer: the selected
    // visible compressed-row ids in ascending order (empty when no row is visible yet).
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
