// Batched evaluation (model/model.h): one call with rows of several sequences gives each
// sequence exactly (bit for bit) the logits it gets evaluated alone with the same chunking,
// whatever else is in the batch: decode rows of many sequences, a prefill chunk mixed with
// decode rows, sequences that start and end between calls, different contexts, rewind slacks
// and QAT settings, over 300 positions (raw window, ratio-4 caches with the indexer's top-k,
// ratio-128 caches). Also: the expert source hears every layer's routing before its products.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/deepseek4/model.h"
#include "model/expert_source.h"
#include "model/session.h"
#include "support/tool_run.h"

namespace ds4::deepseek4 {
namespace {

// One tiny model for the suite: 6 layers (ratios 0,0,4,128,4,128), window 16, top-k 4.
const std::string& tiny_model() {
    static test::TempDir dir;
    static const std::string path = [] {
        const std::string p = dir.file("tiny.gguf");
        const auto r = test::run_command({test::binary("ds4-gguf-gen"), "-q", "-o", p, "--preset",
                                            "tiny", "--indexer-heads", "16", "--seed", "11"});
        EXPECT_EQ(r.exit_code, 0) << r.output;
        return p;
    }();
    return path;
}

// A sequence's plan: its tokens, the chunk sizes it is evaluated in, the call it starts at.
struct Plan {
    std::vector<int32_t> ids;
    std::vector<int64_t> chunks;
    int start = 0;
    model::SequenceOptions opt;
};

std::vector<int64_t> chunks_of(std::initializer_list<std::pair<int64_t, int64_t>> runs) {
    std::vector<int64_t> c;
    for (auto [size, count] : runs) c.insert(c.end(), size_t(count), size);
    return c;
}

// Logits of every position of `p`, evaluated alone in its chunks.
std::vector<float> alone(Model& m, const Plan& p) {
    const int64_t V = m.config().n_vocab;
    auto seq = m.new_sequence(p.opt);
    std::vector<float> out(p.ids.size() * size_t(V));
    int64_t at = 0;
    for (int64_t c : p.chunks) {
        const model::BatchItem it{seq.get(), {p.ids.data() + at, size_t(c)}, model::Logits::All,
                                  out.data() + at * V};
        m.eval(model::Batch(&it, 1));
        at += c;
    }
    EXPECT_EQ(at, int64_t(p.ids.size()));
    return out;
}

// All plans together: call k holds the k-th chunk of every plan that has started and not
// ended. Returns each plan's logits of every position.
std::vector<std::vector<float>> together(Model& m, const std::vector<Plan>& plans, int64_t* max_batch) {
    const int64_t V = m.config().n_vocab;
    std::vector<std::unique_ptr<model::Sequence>> seqs;
    std::vector<std::vector<float>> out;
    std::vector<size_t> next(plans.size(), 0);
    std::vector<int64_t> at(plans.size(), 0);
    for (const Plan& p : plans) {
        seqs.push_back(m.new_sequence(p.opt));
        out.emplace_back(p.ids.size() * size_t(V));
    }
    *max_batch = 0;
    for (int call = 0;; ++call) {
        std::vector<model::BatchItem> batch;
        for (size_t i = 0; i < plans.size(); ++i) {
            const Plan& p = plans[i];
            if (call < p.start || next[i] == p.chunks.size()) continue;
            const int64_t c = p.chunks[next[i]++];
            batch.push_back({seqs[i].get(), {p.ids.data() + at[i], size_t(c)}, model::Logits::All,
                             out[i].data() + at[i] * V});
            at[i] += c;
        }
        bool left = false;
        for (size_t i = 0; i < plans.size(); ++i) left = left || next[i] < plans[i].chunks.size();
        if (batch.empty() && !left) break;
        if (batch.empty()) continue;
        *max_batch = std::max<int64_t>(*max_batch, int64_t(batch.size()));
        m.eval(batch);
    }
    for (size_t i = 0; i < plans.size(); ++i) EXPECT_EQ(seqs[i]->pos(), int64_t(plans[i].ids.size()));
    return out;
}

void expect_bit_identical(const std::vector<float>& a, const std::vector<float>& b, int64_t V,
                          const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            ADD_FAILURE() << what << ": position " << i / size_t(V) << " logit " << i % size_t(V) << ": "
                          << a[i] << " alone, " << b[i] << " batched";
            return;
        }
}

TEST(Batch, EverySequenceBitIdenticalToEvaluatingItAlone) {
    auto m = Model::load(tiny_model(), {.threads = 2});
    const int64_t V = m->config().n_vocab;
    std::vector<Plan> plans(5);
    // A: decode from the start, 300 positions (every cache, the indexer choosing from 20 on).
    plans[0].ids = test::random_token_ids(300, V, 1);
    plans[0].chunks = chunks_of({{1, 300}});
    // B: a long prefill in chunks of 64 beside the others' decode rows, then decode.
    plans[1].ids = test::random_token_ids(290, V, 2);
    plans[1].chunks = chunks_of({{64, 4}, {1, 34}});
    plans[1].start = 3;
    // C: odd chunks, a small rewind slack (attention in blocks shorter than the chunk), QAT off.
    plans[2].ids = test::random_token_ids(200, V, 3);
    plans[2].chunks = chunks_of({{37, 3}, {1, 40}, {49, 1}});
    plans[2].opt = {.ctx = 256, .qat = false, .rewind_slack = 5};
    // D: starts late and ends early (joins and leaves between calls).
    plans[3].ids = test::random_token_ids(60, V, 4);
    plans[3].chunks = chunks_of({{20, 1}, {1, 40}});
    plans[3].start = 100;
    // E: the same tokens as A (identical rows side by side), a context of exactly its length.
    plans[4].ids = plans[0].ids;
    plans[4].chunks = chunks_of({{7, 10}, {1, 230}});
    plans[4].opt = {.ctx = 300};

    int64_t max_batch = 0;
    const auto batched = together(*m, plans, &max_batch);
    EXPECT_GE(max_batch, 4);
    for (size_t i = 0; i < plans.size(); ++i)
        expect_bit_identical(alone(*m, plans[i]), batched[i], V, "sequence " + std::to_string(i));
}

TEST(Batch, DecodeRowsOfManySequencesEqualTheirOwnDecode) {
    // More sequences than threads, each one row per call: attention runs one token per task.
    auto m = Model::load(tiny_model(), {.threads = 2});
    const int64_t V = m->config().n_vocab;
    std::vector<Plan> plans(8);
    for (size_t i = 0; i < plans.size(); ++i) {
        plans[i].ids = test::random_token_ids(40 + 5 * int64_t(i), V, 20 + i);
        plans[i].chunks = chunks_of({{int64_t(3 + i), 1}, {1, 37 + 5 * int64_t(i) - int64_t(i)}});
        plans[i].opt = {.ctx = 128};
    }
    int64_t max_batch = 0;
    const auto batched = together(*m, plans, &max_batch);
    EXPECT_EQ(max_batch, 8);
    for (size_t i = 0; i < plans.size(); ++i)
        expect_bit_identical(alone(*m, plans[i]), batched[i], V, "sequence " + std::to_string(i));
}

TEST(Batch, RejectsBadBatchesBeforeChangingAnything) {
    auto m = Model::load(tiny_model(), {.threads = 2});
    const int64_t V = m->config().n_vocab;
    auto a = m->new_sequence({.ctx = 8});
    auto b = m->new_sequence({.ctx = 8});
    auto other = Model::load(tiny_model(), {.threads = 1});
    auto foreign = other->new_sequence({.ctx = 8});
    const std::vector<int32_t> ok = {1, 2, 3}, bad = {1, int32_t(V)}, long_ids(9, 1);
    std::vector<float> logits(static_cast<size_t>(V));
    auto expect_throw = [&](std::vector<model::BatchItem> batch, const char* what) {
        try {
            m->eval(batch);
            ADD_FAILURE() << what << ": accepted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
        EXPECT_EQ(a->pos(), 0);
        EXPECT_EQ(b->pos(), 0);
    };
    expect_throw({{a.get(), ok}, {b.get(), bad}}, "out of range");
    expect_throw({{a.get(), ok}, {a.get(), ok}}, "twice");
    expect_throw({{a.get(), ok}, {b.get(), long_ids}}, "context exceeded");
    expect_throw({{a.get(), ok}, {foreign.get(), ok}}, "another model");
    expect_throw({{a.get(), ok, model::Logits::Last, nullptr}}, "no buffer");
    m->eval(std::vector<model::BatchItem>{{a.get(), ok, model::Logits::Last, logits.data()}});
    EXPECT_EQ(a->pos(), 3);
}

// An expert source that hands out only the experts announced for the layer being run, and
// records what it was told.
class CheckingSource final : public model::ExpertSource {
public:
    explicit CheckingSource(const Model& m) : m_(m) {}
    void prepare(uint32_t layer, std::span<const int32_t> experts, std::span<const int32_t> rows) override {
        EXPECT_EQ(rows.size(), experts.size());
        EXPECT_EQ(open_, -1) << "layer " << layer << " prepared while layer " << open_ << " is open";
        EXPECT_TRUE(std::is_sorted(experts.begin(), experts.end()));
        EXPECT_TRUE(std::adjacent_find(experts.begin(), experts.end()) == experts.end());
        open_ = int(layer);
        ready_ = std::set<int32_t>(experts.begin(), experts.end());
        ++prepares[layer];
        announced[layer] += int64_t(experts.size());
    }
    model::ExpertWeights expert(uint32_t layer, int32_t e) const override {
        if (int(layer) != open_ || !ready_.count(e)) fail("expert {} of layer {} used without prepare()", e, layer);
        const LayerWeights& L = m_.weights().layers[layer];
        return {L.gate_exps.expert(e), L.up_exps.expert(e), L.down_exps.expert(e)};
    }
    void release(uint32_t layer) override {
        EXPECT_EQ(open_, int(layer));
        open_ = -1;
    }
    std::map<uint32_t, int> prepares;
    std::map<uint32_t, int64_t> announced;

private:
    const Model& m_;
    int open_ = -1;
    std::set<int32_t> ready_;
};

TEST(ExpertSource, IsToldEachLayersRoutingBeforeItsProducts) {
    auto m = Model::load(tiny_model(), {.threads = 2});
    const int64_t V = m->config().n_vocab;
    const auto ids = test::random_token_ids(50, V, 7);
    std::vector<float> resident, checked;
    {
        model::Session s(*m, {.ctx = 64, .prefill_chunk = 16});
        s.eval(ids, &resident, true);
    }
    auto source = std::make_shared<CheckingSource>(*m);
    m->set_expert_source(source);
    model::DecisionLog log;
    model::Session s(*m, {.ctx = 64, .prefill_chunk = 16});
    s.set_decision_log(&log);
    s.eval(ids, &checked, true);
    expect_bit_identical(resident, checked, V, "with the checking source");
    // One prepare per layer and call (4 calls of 16, 16, 16, 2 tokens), announcing exactly the
    // distinct experts the decision log shows for that call's tokens.
    for (uint32_t il = 0; il < m->config().n_layer; ++il) {
        EXPECT_EQ(source->prepares[il], 4) << "layer " << il;
        int64_t distinct = 0;
        for (int64_t c0 = 0; c0 < 50; c0 += 16) {
            std::set<int32_t> used;
            for (int64_t p = c0; p < std::min<int64_t>(50, c0 + 16); ++p)
                for (int32_t e : log.experts[size_t(p)][il]) used.insert(e);
            distinct += int64_t(used.size());
        }
        EXPECT_EQ(source->announced[il], distinct) << "layer " << il;
    }
}

}  // namespace
}  // namespace ds4::deepseek4
