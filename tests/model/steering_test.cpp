// Directional steering in the forward pass of both families (model/steering.h): scale 0 (and
// the capture alone) leave the logits bit-identical; a steered layer's captured output is the
// unsteered one edited by F -= s v (v.F), computed here directly, while everything before it
// is untouched; steering keeps batched == alone; directions of the wrong shape are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/model.h"
#include "model/session.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4 {
namespace {

struct Family {
    const char* name;
    std::vector<std::string> gen_args;
};

// gtest names the cases by the family (not the struct's bytes).
void PrintTo(const Family& f, std::ostream* os) { *os << f.name; }

class SteeringModel : public ::testing::TestWithParam<Family> {
protected:
    static void SetUpTestSuite() { dir_ = new test::TempDir; }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }
    void SetUp() override {
        const Family& f = GetParam();
        std::string& path = paths_[f.name];  // one file per family for the suite
        if (path.empty()) path = test::generate_model(*dir_, std::string(f.name) + ".gguf", f.gen_args);
        path_ = path;
        m_ = model::open(path_, {.threads = 2});
        L_ = m_->info().n_layer;
        D_ = m_->info().n_embd;
        ids_ = test::random_token_ids(24, m_->info().n_vocab, 5);
    }

    // Unit directions for every layer, or only for `only` (the others all zero).
    std::shared_ptr<model::Steering> steering(float ffn, float attn, int only = -1) const {
        auto s = std::make_shared<model::Steering>();
        s->n_layer = L_;
        s->n_embd = D_;
        model::SteeringSlot slot{.directions = std::vector<float>(size_t(L_) * size_t(D_), 0.0f), .attn = attn, .ffn = ffn, .source = "test"};
        std::mt19937 rng(9);
        std::normal_distribution<float> g;
        for (uint32_t il = 0; il < L_; ++il) {
            if (only >= 0 && il != uint32_t(only)) continue;
            float* v = slot.directions.data() + size_t(il) * size_t(D_);
            double n2 = 0;
            for (int64_t i = 0; i < D_; ++i) {
                v[i] = g(rng);
                n2 += double(v[i]) * v[i];
            }
            for (int64_t i = 0; i < D_; ++i) v[i] = float(v[i] / std::sqrt(n2));
        }
        s->slots.push_back(std::move(slot));
        return s;
    }

    // Every position's logits of ids_, in chunks of 7; with a capture of the last row.
    std::vector<float> run(model::SublayerCapture* cap = nullptr) {
        model::Session s(*m_, {.ctx = 64, .prefill_chunk = 7});
        if (cap) {
            cap->reset(L_, D_);
            s.sequence().set_sublayer_capture(cap);
        }
        std::vector<float> logits;
        s.eval(ids_, &logits, true);
        return logits;
    }

    static test::TempDir* dir_;
    static inline std::map<std::string, std::string> paths_;
    std::string path_;
    std::unique_ptr<model::Model> m_;
    uint32_t L_ = 0;
    int64_t D_ = 0;
    std::vector<int32_t> ids_;
};
test::TempDir* SteeringModel::dir_ = nullptr;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_P(SteeringModel, ScaleZeroAndTheCaptureAreBitIdentical) {
    const std::vector<float> plain = run();
    model::SublayerCapture cap;
    EXPECT_TRUE(same_bits(run(&cap), plain)) << "the capture changed the logits";
    for (uint32_t il = 0; il < L_; ++il) EXPECT_EQ(cap.seen[il], 1) << "layer " << il;
    m_->set_steering(steering(0.0f, 0.0f));
    EXPECT_TRUE(same_bits(run(), plain)) << "scale 0 changed the logits";
    m_->set_steering(steering(0.5f, 0.0f));
    EXPECT_FALSE(same_bits(run(), plain)) << "a non-zero scale changed nothing";
    m_->set_steering(nullptr);
    EXPECT_TRUE(same_bits(run(), plain));
}

TEST_P(SteeringModel, TheEditIsTheDirectComputationAtItsLayer) {
    const int k = int(L_ / 2);
    for (const auto which : {model::Sublayer::Ffn, model::Sublayer::Attention}) {
        const bool ffn = which == model::Sublayer::Ffn;
        const float s = ffn ? 1.5f : -2.0f;
        model::SublayerCapture before, after;
        m_->set_steering(nullptr);
        const std::vector<float> plain = run(&before);
        const auto st = steering(ffn ? s : 0.0f, ffn ? 0.0f : s, k);
        m_->set_steering(st);
        EXPECT_FALSE(same_bits(run(&after), plain));
        const size_t row = size_t(k) * size_t(D_);
        // Before the edit: every earlier output, and layer k's attention when the FFN is steered.
        EXPECT_TRUE(std::equal(before.attn.begin(), before.attn.begin() + row + (ffn ? D_ : 0), after.attn.begin()));
        EXPECT_TRUE(std::equal(before.ffn.begin(), before.ffn.begin() + row, after.ffn.begin()));
        const float* F = (ffn ? before.ffn : before.attn).data() + row;
        const float* got = (ffn ? after.ffn : after.attn).data() + row;
        const float* v = st->slots[0].directions.data() + row;
        double dot = 0, scale = 0;
        for (int64_t i = 0; i < D_; ++i) {
            dot += double(v[i]) * F[i];
            scale = std::max(scale, std::abs(double(F[i])));
        }
        ASSERT_GT(std::abs(dot), 1e-6 * scale) << "the direction is orthogonal to the output: nothing to test";
        for (int64_t i = 0; i < D_; ++i)
            EXPECT_NEAR(got[i], F[i] - double(s) * v[i] * dot, 1e-5 * (1 + scale)) << (ffn ? "ffn" : "attn") << " " << i;
    }
    m_->set_steering(nullptr);
}

TEST_P(SteeringModel, BatchedEqualsAloneWithSteering) {
    m_->set_steering(steering(-1.0f, 0.5f));
    const int64_t V = m_->info().n_vocab;
    const std::vector<int32_t> other = test::random_token_ids(9, V, 6);
    auto a = m_->new_sequence({.ctx = 64}), b = m_->new_sequence({.ctx = 64});
    std::vector<float> la(ids_.size() * size_t(V)), lb(other.size() * size_t(V));
    const model::BatchItem both[2] = {{a.get(), ids_, model::Logits::All, la.data()},
                                      {b.get(), other, model::Logits::All, lb.data()}};
    m_->eval(model::Batch(both, 2));
    auto c = m_->new_sequence({.ctx = 64});
    std::vector<float> lc(la.size());
    const model::BatchItem alone{c.get(), ids_, model::Logits::All, lc.data()};
    m_->eval(model::Batch(&alone, 1));
    EXPECT_TRUE(same_bits(la, lc));
    m_->set_steering(nullptr);
}

TEST_P(SteeringModel, WrongShapesAreRefused) {
    auto s = steering(1.0f, 0.0f);
    s->n_embd = D_ + 1;
    s->slots[0].directions.resize(size_t(L_) * size_t(D_ + 1));
    try {
        m_->set_steering(s);
        FAIL() << "accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("do not fit this model"), std::string::npos) << e.what();
    }
    auto nan = steering(1.0f, 0.0f);
    nan->slots[0].directions[3] = NAN;
    nan->slots[0].source = "nan.f32";
    try {
        m_->set_steering(nan);
        FAIL() << "accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("nan.f32: layer 0 value 3 is not finite"), std::string::npos) << e.what();
    }
    EXPECT_EQ(m_->steering(), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Families, SteeringModel,
                         ::testing::Values(Family{"deepseek4", {"--preset", "tiny", "--seed", "21"}},
                                           Family{"glm", {"--arch", "glm-dsa", "--seed", "22"}}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ds4
