// The DeepSeek V4 model on the CPU: a loaded, validated GGUF (Model) and one evaluation
// timeline over it (Session) with the per-layer KV state of ARCHITECTURE.md §4.
//
//   auto model = Model::load("ds4flash.gguf");
//   Session s(*model, {.ctx = 4096, .threads = 2});
//   s.eval(tokens, &logits);           // prefill (chunked), logits of every position
//   s.eval({next}, &logits);           // decode one token
//   s.truncate(n);                     // back to the first n tokens
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "gguf/reader.h"
#include "model/config.h"
#include "model/weights.h"
#include "ops/rope.h"

namespace ds4::model {

class Model {
public:
    // Opens, validates (metadata and every tensor's shape/type) and binds. Throws ds4::Error.
    static std::unique_ptr<Model> load(const std::string& path,
                                       gguf::File::Load how = gguf::File::Load::Map);

    const ModelConfig& config() const { return cfg_; }
    const Weights& weights() const { return w_; }
    const gguf::File& file() const { return *file_; }
    // RoPE of layer il: plain for ratio-0 layers, compressed base + YaRN otherwise.
    const ops::Rope& rope(uint32_t il) const;

private:
    std::unique_ptr<gguf::File> file_;
    ModelConfig cfg_;
    Weights w_;
    std::unique_ptr<ops::Rope> rope_plain_, rope_compressed_;
};

struct SessionOptions {
    int64_t ctx = 4096;          // maximum positions
    int threads = 1;
    int64_t prefill_chunk = 512;  // tokens per batch in eval(); 1 = token-by-token decode
    bool qat = true;             // FP8 KV / FP4 indexer simulations (off to match llama.cpp)
    // truncate() back by up to this many positions is O(1): the raw window and compressor
    // rings keep that many extra positions. Farther rewinds recompute the kept prefix.
    int64_t rewind_slack = 512;
};

// Optional record of the discrete decisions, for comparison with the oracle.
struct DecisionLog {
    // Per evaluated position and layer: chosen expert ids (in selection order).
    std::vector<std::vector<std::vector<int32_t>>> experts;   // [pos][layer][k]
    // Per position and ratio-4 layer: selected compressed rows (ascending), only when the
    // indexer had to choose (more visible rows than top-k).
    std::vector<std::vector<std::vector<int32_t>>> indexer;   // [pos][layer][...]
    // How close each routed (non-hash) expert choice was: the biased score of the last chosen
    // expert minus that of the best one left out (>= 0). NaN for hash layers.
    std::vector<std::vector<float>> expert_margin;            // [pos][layer]
};

class Session {
public:
    Session(const Model& model, SessionOptions opt);
    ~Session();

    // Evaluates tokens at positions pos() .. pos()+n-1, in chunks of prefill_chunk. If logits
    // is non-null it receives [n][n_vocab] (all_logits) or [n_vocab] of the last token.
    void eval(const std::vector<int32_t>& tokens, std::vector<float>* logits,
              bool all_logits = false);
    // Forgets everything from position n on (n <= pos()); the state equals a fresh run over
    // the first n tokens. Cheap within options().rewind_slack positions (see can_rewind), a
    // recomputation of the kept prefix otherwise.
    void truncate(int64_t n);
    void reset() { truncate(0); }
    // Whether truncate(n) is a cheap rewind (no recomputation).
    bool can_rewind(int64_t n) const;
    // The longest prefix of `tokens` this session already holds.
    int64_t common_prefix(const std::vector<int32_t>& tokens) const;

    // A full copy of the KV state (memory: the whole state), to come back to later, e.g. after
    // a decode probe. restore() requires a snapshot of a session over the same model and
    // options.
    class Snapshot;
    std::shared_ptr<const Snapshot> snapshot() const;
    void restore(const Snapshot& snap);

    int64_t pos() const { return int64_t(tokens_.size()); }
    const std::vector<int32_t>& tokens() const { return tokens_; }
    const SessionOptions& options() const { return opt_; }
    // Bytes of KV state this session allocated (raw rings, compressed caches, compressor
    // rings, all sized for the whole context and the rewind slack).
    int64_t state_bytes() const;
    // Bytes of KV state the positions held now occupy: the raw window rows in use, the
    // compressed and indexer rows written, the compressors' open windows.
    int64_t state_bytes_used() const;
    void set_decision_log(DecisionLog* log) { log_ = log; }

    struct LayerState;

private:
    void eval_chunk(const int32_t* tokens, int64_t n, float* logits, bool all_logits);

    const Model& model_;
    SessionOptions opt_;
    ThreadPool pool_;
    std::vector<int32_t> tokens_;
    std::vector<std::unique_ptr<LayerState>> layers_;
    DecisionLog* log_ = nullptr;
};

}  // namespace ds4::model
