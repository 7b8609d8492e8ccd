// The execution interface every model family implements (docs/ARCHITECTURE.md, "Execution
// interface"). A Model is loaded once (weights, one thread pool, scratch) and serves any number
// of Sequences: plain objects the caller owns, each holding one timeline's KV state, positions
// and token history. One call evaluates rows of several sequences at once (a Batch), reading
// every weight matrix once for all of them; each sequence's results are bit-identical to
// evaluating it alone with the same chunking.
//
// A model may hold only a range of its layers (LayerRange, e.g. "0:20" or "21:output"): then
// it exposes the three stages separately, and a pipeline chains them over processes:
//
//   hidden = embed(batch)                  (range starts at layer 0)
//   hidden = eval_layers(batch, hidden)    (this range's layers; advances the sequences)
//   logits = head(batch, hidden)           (range ends with the output head)
//
// The hidden state between stages is [rows][hidden_size()] floats (DeepSeek V4: the four
// hyper-connection streams of n_embd values each). eval() runs all three.
//
// Calls on one Model are serialized (an internal lock): the pool and scratch are shared.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/thread_pool.h"
#include "gguf/reader.h"
#include "model/decision_log.h"
#include "model/expert_observer.h"
#include "model/expert_source.h"
#include "model/layer_range.h"
#include "model/steering.h"

namespace ds4::model {

// The model's identity: architecture, shape, and hashes that tell whether a saved state fits.
struct ModelInfo {
    std::string architecture;   // general.architecture, e.g. "deepseek4"
    std::string name;           // general.name
    uint32_t n_vocab = 0;
    uint32_t n_layer = 0;       // of the whole model (the range holds a part)
    int64_t hidden_size = 0;    // floats per row of the hidden state between layers
    int64_t n_embd = 0;         // floats per row of a sublayer's output (the steering width)
    uint64_t trained_ctx = 0;   // the context length the model was trained for
    LayerRange range;
    // XXH3-128 of the model's metadata (every key/value but general.* and the range a split
    // file records, ds4.split.layers): equal for every range of one model and its split files.
    std::array<uint8_t, 16> metadata_hash{};
};

struct SequenceOptions {
    int64_t ctx = 4096;           // maximum positions
    bool qat = true;              // FP8 KV / FP4 indexer simulations (off to match llama.cpp)
    // rewind() back by up to this many positions is O(1): the raw window and compressor rings
    // keep that many extra positions. Farther rewinds need the prefix evaluated again.
    int64_t rewind_slack = 512;
};

// One timeline's state for the layers of a model's range. Created by Model::new_sequence and
// usable only with that model; the caller owns it. Copyable through clone()/assign() (memory
// snapshots) and serializable through Model::save_state / load_state.
class Sequence {
public:
    virtual ~Sequence() = default;

    int64_t pos() const { return int64_t(tokens_.size()); }
    const std::vector<int32_t>& tokens() const { return tokens_; }
    const SequenceOptions& options() const { return opt_; }
    // The longest prefix of `tokens` this sequence holds.
    int64_t common_prefix(std::span<const int32_t> tokens) const;

    // Whether the state after the first n positions is recoverable without evaluating again,
    // and that rewind (requires can_rewind(n)).
    virtual bool can_rewind(int64_t n) const = 0;
    virtual void rewind(int64_t n) = 0;
    // Back to no positions (always possible).
    virtual void clear() = 0;

    // Bytes of state allocated (sized for the whole context and the rewind slack), and bytes
    // the positions held now occupy.
    virtual int64_t state_bytes() const = 0;
    virtual int64_t state_bytes_used() const = 0;

    // A full copy (memory snapshot), and restoring one of the same model and options.
    virtual std::unique_ptr<Sequence> clone() const = 0;
    virtual void assign(const Sequence& other) = 0;

    // Optional record of the discrete decisions of every position evaluated from now on.
    void set_decision_log(DecisionLog* log) { log_ = log; }
    DecisionLog* decision_log() const { return log_; }
    // Optional capture of the last evaluated row's sublayer outputs (model/steering.h), reset
    // by the caller to the model's n_layer x n_embd.
    void set_sublayer_capture(SublayerCapture* c) { capture_ = c; }
    SublayerCapture* sublayer_capture() const { return capture_; }
    // Optional look at the routed experts' inputs of every row (model/expert_observer.h).
    void set_expert_observer(ExpertObserver* o) { observer_ = o; }
    ExpertObserver* expert_observer() const { return observer_; }

protected:
    explicit Sequence(SequenceOptions opt) : opt_(opt) {}
    Sequence(const Sequence&) = default;
    Sequence& operator=(const Sequence&) = default;

    SequenceOptions opt_;
    std::vector<int32_t> tokens_;  // every position evaluated, in order
    DecisionLog* log_ = nullptr;
    SublayerCapture* capture_ = nullptr;
    ExpertObserver* observer_ = nullptr;
};

// Which logits a batch item wants.
enum class Logits { None, Last, All };

// Rows of one sequence in a batch: `tokens` at positions seq->pos() .. pos()+n-1. With
// logits != None, `logits` receives [1 or n][n_vocab] floats (head() or eval()).
//
// The draft seam (speculative decoders read the target's hidden states): with hidden != None,
// eval() also writes the rows' final hidden states (after the range's last layer, before the
// head) to `hidden`, [1 or n][info().hidden_size]; with a non-empty `capture`, eval() and
// eval_layers() write the output of each listed layer (of the model's range, ascending) for
// every row to `captured`, [capture.size()][n][hidden_size]. Neither changes any result. With
// hidden_from = f > 0, both cover only the item's rows f..n-1 (All: [n-f][hidden_size]; a
// drafter that reads the end of a long prompt).
struct BatchItem {
    Sequence* seq = nullptr;
    std::span<const int32_t> tokens = {};
    Logits want = Logits::None;
    float* logits = nullptr;
    Logits hidden_want = Logits::None;
    float* hidden = nullptr;
    std::span<const uint32_t> capture = {};
    float* captured = nullptr;
    int64_t hidden_from = 0;
};
// The rows of a call: items in order, each item's tokens in order. A sequence appears at most
// once per call.
using Batch = std::span<const BatchItem>;
int64_t batch_rows(Batch b);

class Model {
public:
    virtual ~Model() = default;
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    virtual const ModelInfo& info() const = 0;
    // The GGUF the model was loaded from (its tokenizer and template metadata live there).
    virtual const gguf::File& file() const = 0;
    virtual std::unique_ptr<Sequence> new_sequence(const SequenceOptions& opt) const = 0;
    // Bytes a sequence with these options allocates, without allocating it.
    virtual int64_t sequence_bytes(const SequenceOptions& opt) const = 0;

    // The stages (see the top of this file). Each checks the batch (sequences of this model,
    // valid token ids, room in every context) and throws ds4::Error before changing anything.
    // hidden is [batch_rows(b)][info().hidden_size].
    virtual void embed(Batch b, float* hidden) = 0;
    virtual void eval_layers(Batch b, float* hidden) = 0;  // appends each item's tokens
    virtual void head(Batch b, const float* hidden) = 0;
    // embed + eval_layers + head; the range must be the whole model.
    virtual void eval(Batch b) = 0;

    // A sequence's state as bytes (docs/STATE_FORMAT.md), with optional next-token logits
    // ([n_vocab], e.g. to sample at once after loading), and back. load_state checks the
    // checksum, the format version and that the state belongs to this model and range, and
    // throws ds4::Error saying what differs; `seq` is unchanged on error.
    virtual std::vector<uint8_t> save_state(const Sequence& seq,
                                            std::span<const float> logits = {}) const = 0;
    virtual void load_state(std::span<const uint8_t> bytes, Sequence& seq,
                            std::vector<float>* logits = nullptr) const = 0;

    // Where routed-expert weights come from (resident by default); see model/expert_source.h.
    virtual void set_expert_source(std::shared_ptr<ExpertSource> source) = 0;
    virtual std::shared_ptr<ExpertSource> expert_source() const = 0;
    // Where the routed experts of the model's range lie in its file (for a source that reads
    // them itself: src/streaming).
    virtual ExpertFileLayout expert_layout() const = 0;

    ThreadPool& pool() { return pool_; }

    // Directional steering (model/steering.h) of every later call, nullptr for none. The
    // directions must be info().n_layer x info().n_embd (throws ds4::Error otherwise). A call
    // already running keeps the steering it started with. Applies to the layers this process
    // evaluates (a pipeline coordinator's front ends refuse it: frontend/steering_options.h).
    void set_steering(std::shared_ptr<const Steering> s);
    std::shared_ptr<const Steering> steering() const {
        std::lock_guard lock(steering_mu_);
        return steering_;
    }

protected:
    explicit Model(int threads) : pool_(threads) {}

private:
    ThreadPool pool_;
    mutable std::mutex steering_mu_;
    std::shared_ptr<const Steering> steering_;
};

struct OpenOptions {
    int threads = 1;
    gguf::File::Load load = gguf::File::Load::Map;
    // Layers to hold; unset = the whole model. Parsed with LayerRange::parse once n_layer is
    // known (e.g. "0:20", "21:output").
    std::string layers = "";
    // SSD streaming (docs/SSD_STREAMING.md): every tensor but the routed experts is read into
    // memory (as Load::Copy), the routed experts are neither read nor mapped; the caller must
    // set_expert_source() to a source that reads them (streaming::ExpertCache) before eval.
    bool stream_experts = false;
};

// Opens a GGUF as the model family its general.architecture names ("deepseek4"). Throws
// ds4::Error naming the file and what is wrong.
std::unique_ptr<Model> open(const std::string& path, const OpenOptions& opt = {});
// The configuration the family derives from a file, as --inspect prints it; throws ds4::Error
// when this build cannot run the file.
std::string describe(const gguf::File& f);

}  // namespace ds4::model
