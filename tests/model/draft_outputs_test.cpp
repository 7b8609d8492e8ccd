// The draft seam's outputs of Model::eval (model/model.h, BatchItem::hidden and ::capture): the
// final hidden state of the rows that want it and the output of chosen layers are exactly the
// hidden states a layer range ending there computes (a model opened with layers "0:L"), for a
// sequence alone and beside another in one batch, over a prefill chunk and decode steps; asking
// for them changes no logit; bad requests are refused before anything changes.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/model.h"
#include "support/tool_run.h"

namespace ds4 {
namespace {

struct Fixture {
    test::TempDir dir;
    std::string path;
    Fixture() {
        path = dir.file("tiny.gguf");
        const auto r = test::run_command({test::binary("ds4-gguf-gen"), "-q", "-o", path, "--preset", "tiny",
                                            "--indexer-heads", "16", "--seed", "21"});
        EXPECT_EQ(r.exit_code, 0) << r.output;
    }
};

// The hidden states after layer `last` of every row of `ids`, evaluated in `chunks` by a model
// holding layers 0..last.
std::vector<float> range_hidden(const std::string& path, uint32_t last, const std::vector<int32_t>& ids,
                                const std::vector<int64_t>& chunks) {
    auto m = model::open(path, {.threads = 2, .layers = "0:" + std::to_string(last)});
    auto seq = m->new_sequence({.ctx = 512});
    const int64_t H = m->info().hidden_size;
    std::vector<float> out(ids.size() * size_t(H));
    int64_t at = 0;
    for (int64_t n : chunks) {
        const model::BatchItem it{seq.get(), {ids.data() + at, size_t(n)}};
        m->embed(model::Batch(&it, 1), out.data() + at * H);
        m->eval_layers(model::Batch(&it, 1), out.data() + at * H);
        at += n;
    }
    return out;
}

bool equal(const float* a, const float* b, int64_t n) { return std::memcmp(a, b, size_t(n) * sizeof(float)) == 0; }

TEST(DraftOutputs, HiddenStatesAndCapturesAreThoseOfTheLayerRanges) {
    Fixture fx;
    auto m = model::open(fx.path, {.threads = 2});
    const int64_t V = m->info().n_vocab, H = m->info().hidden_size;
    const uint32_t L = m->info().n_layer;
    ASSERT_GE(L, 4u);
    const std::vector<uint32_t> capture = {1, 3};
    const std::vector<int32_t> a = test::random_token_ids(300, V, 3), b = test::random_token_ids(300, V, 4);
    std::vector<int64_t> chunks = {150, 140};  // prefill (every cache), then decode steps
    chunks.insert(chunks.end(), 10, 1);

    // References: the layer ranges 0:1, 0:3 and the whole trunk, sequence a alone.
    const auto ref1 = range_hidden(fx.path, 1, a, chunks), ref3 = range_hidden(fx.path, 3, a, chunks);
    const auto ref_last = range_hidden(fx.path, L - 1, a, chunks);
    const auto ref_b = range_hidden(fx.path, L - 1, b, chunks);

    auto sa = m->new_sequence({.ctx = 512}), sb = m->new_sequence({.ctx = 512});
    auto plain = m->new_sequence({.ctx = 512});
    int64_t at = 0;
    for (int64_t n : chunks) {
        SCOPED_TRACE(at);
        std::vector<float> la(static_cast<size_t>(n * V)), lb(static_cast<size_t>(V)), lp(static_cast<size_t>(n * V));
        std::vector<float> hidden_a(static_cast<size_t>(n * H)), hidden_b(static_cast<size_t>(H)),
            captured(static_cast<size_t>(2 * n * H));
        model::BatchItem items[2] = {
            {sa.get(), {a.data() + at, size_t(n)}, model::Logits::All, la.data(), model::Logits::All, hidden_a.data(),
             capture, captured.data()},
            {sb.get(), {b.data() + at, size_t(n)}, model::Logits::Last, lb.data(), model::Logits::Last,
             hidden_b.data()}};
        m->eval(model::Batch(items, 2));
        EXPECT_TRUE(equal(hidden_a.data(), ref_last.data() + at * H, n * H)) << "final hidden states";
        EXPECT_TRUE(equal(captured.data(), ref1.data() + at * H, n * H)) << "layer 1";
        EXPECT_TRUE(equal(captured.data() + n * H, ref3.data() + at * H, n * H)) << "layer 3";
        EXPECT_TRUE(equal(hidden_b.data(), ref_b.data() + (at + n - 1) * H, H)) << "the other sequence's last row";
        // The same rows without the draft outputs: the same logits.
        const model::BatchItem p{plain.get(), {a.data() + at, size_t(n)}, model::Logits::All, lp.data()};
        m->eval(model::Batch(&p, 1));
        EXPECT_TRUE(equal(la.data(), lp.data(), n * V));
        at += n;
    }
}

TEST(DraftOutputs, BadRequestsAreRefusedBeforeAnythingChanges) {
    Fixture fx;
    auto m = model::open(fx.path, {.threads = 1});
    const int64_t H = m->info().hidden_size;
    auto seq = m->new_sequence({.ctx = 64});
    const std::vector<int32_t> ids = {1, 2, 3};
    std::vector<float> buf(size_t(8 * 3 * H));
    auto refused = [&](model::BatchItem it, const char* what) {
        it.seq = seq.get();
        it.tokens = ids;
        try {
            m->eval(model::Batch(&it, 1));
            ADD_FAILURE() << "accepted: " << what;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
        EXPECT_EQ(seq->pos(), 0);
    };
    const std::vector<uint32_t> outside = {99}, descending = {3, 1};
    refused({.hidden_want = model::Logits::Last}, "hidden states wanted but no buffer");
    refused({.capture = outside, .captured = buf.data()}, "capture of layer 99");
    refused({.capture = descending, .captured = buf.data()}, "strictly ascending");
    const std::vector<uint32_t> one = {0};
    refused({.capture = one}, "layer captures wanted but no buffer");
    // A range holding layers 2.. cannot capture layer 1.
    auto tail = model::open(fx.path, {.threads = 1, .layers = "2:output"});
    auto ts = tail->new_sequence({.ctx = 64});
    const std::vector<uint32_t> l1 = {1};
    const model::BatchItem it{ts.get(), ids, model::Logits::None, nullptr, model::Logits::None, nullptr, l1, buf.data()};
    EXPECT_THROW(tail->eval_layers(model::Batch(&it, 1), buf.data()), Error);
}

}  // namespace
}  // namespace ds4
