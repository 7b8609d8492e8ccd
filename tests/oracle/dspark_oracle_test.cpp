// deepseek4::DsparkHead against the numpy reference drafter (tests/reference/dspark_ref.py,
// written from docs/SPECULATIVE.md independently of the engine): on a generated tiny trunk and
// DSpark file, the trunk's captured target-layer states of a prompt become the context; one
// block at the prompt's last position (a full window, and a short one) must give the
// reference's base and Markov-biased logits, final hidden states, confidences, proposals and
// cut, with and without the FP8 round trip of the KV rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/deepseek4/dspark.h"
#include "model/deepseek4/model.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4::deepseek4 {
namespace {

std::vector<float> read_f32(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<float> v(bytes.size() / sizeof(float));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
    return v;
}

// max |a - b| / max |b|.
double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double d = 0, m = 0;
    for (size_t i = 0; i < b.size(); ++i) {
        d = std::max(d, double(std::abs(a[i] - b[i])));
        m = std::max(m, double(std::abs(b[i])));
    }
    return d / std::max(m, 1e-30);
}

class DsparkOracleTest : public ::testing::Test {
protected:
    void SetUp() override {
        dspark_ = dir_.file("dspark.gguf");
        trunk_ = test::generate_model(dir_, "trunk.gguf", {"--seed", "11", "--dspark-out", dspark_});
        model_ = Model::load(trunk_, {.threads = 2});
        head_ = DsparkHead::open(*model_, dspark_);
    }

    struct Ref {
        nlohmann::json summary;
        std::vector<float> logits, base, hidden;
    };
    // The reference's block at p from the capture rows [p+1-rows, p] (cap: [T][n][HCD]).
    Ref reference(const std::vector<float>& cap, int64_t n, int64_t p, int64_t rows, int32_t token, float threshold,
                  bool fp8) {
        const size_t T = head_->info().target_layers.size(), H = size_t(model_->info().hidden_size);
        std::vector<float> feats;  // [rows][T][HC*D]
        for (int64_t t = p + 1 - rows; t <= p; ++t)
            for (size_t j = 0; j < T; ++j) {
                const float* x = &cap[(j * size_t(n) + size_t(t)) * H];
                feats.insert(feats.end(), x, x + H);
            }
        const std::string f = dir_.file("feats.f32");
        std::ofstream(f, std::ios::binary).write(reinterpret_cast<const char*>(feats.data()),
                                                  std::streamsize(feats.size() * sizeof(float)));
        std::vector<std::string> argv = {"/usr/bin/env",
                                         std::string("PYTHONPATH=") + DS4_ORACLE_BIN + "/../llama.cpp/gguf-py",
                                         "/usr/bin/python3",
                                         std::string(DS4_SOURCE_DIR) + "/tests/reference/dspark_ref.py",
                                         "--trunk", trunk_, "--dspark", dspark_, "--features", f,
                                         "--token", std::to_string(token), "--pos", std::to_string(p),
                                         "--threshold", std::to_string(threshold),
                                         "--out-logits", dir_.file("l.f32"), "--out-base-logits", dir_.file("b.f32"),
                                         "--out-hidden", dir_.file("h.f32")};
        if (!fp8) argv.push_back("--no-fp8");
        const test::RunResult r = test::run_command(argv);
        EXPECT_EQ(r.exit_code, 0) << r.output;
        Ref ref;
        const std::string out = r.output.substr(r.output.rfind('{'));
        ref.summary = nlohmann::json::parse(out);
        ref.logits = read_f32(dir_.file("l.f32"));
        ref.base = read_f32(dir_.file("b.f32"));
        ref.hidden = read_f32(dir_.file("h.f32"));
        return ref;
    }

    // The block of a context holding rows 0..p of the capture, against the reference.
    void compare(const std::vector<float>& cap, int64_t n, int64_t p, int32_t token, bool qat, double tol) {
        SCOPED_TRACE(testing::Message() << "p " << p << " qat " << qat);
        const size_t T = head_->info().target_layers.size(), H = size_t(model_->info().hidden_size);
        std::vector<float> part;
        for (size_t j = 0; j < T; ++j)
            part.insert(part.end(), cap.begin() + long(j * size_t(n) * H), cap.begin() + long((j * size_t(n) + size_t(p + 1)) * H));
        DsparkContext ctx = head_->new_context(qat);
        head_->commit(ctx, 0, p + 1, part.data());
        // A threshold that cuts the block inside when the confidences allow it.
        const DsparkBlock all = head_->draft(ctx, p, token, 0.0f);
        EXPECT_EQ(all.cut, int(all.proposals.size()));
        std::vector<float> sorted = all.confidence;
        std::sort(sorted.begin(), sorted.end());
        float threshold = 0.5f;
        for (size_t i = 0; i + 1 < sorted.size(); ++i) {
            const float m = 0.5f * (sorted[i] + sorted[i + 1]);
            if (all.confidence[0] >= m) threshold = m;  // the first row passes: cut >= 1
        }
        const DsparkBlock b = head_->draft(ctx, p, token, threshold);
        EXPECT_EQ(b.logits, all.logits);
        const int64_t rows = p + 1 - ctx.begin();  // the window the block saw, and p
        EXPECT_EQ(rows, std::min<int64_t>(p + 1, head_->window() + 1));
        const Ref ref = reference(cap, n, p, rows, token, threshold, qat);

        const int64_t B = head_->info().block_size, V = model_->config().n_vocab;
        ASSERT_EQ(ref.logits.size(), size_t(B * V));
        EXPECT_LT(rel_diff(b.hidden, ref.hidden), tol);
        EXPECT_LT(rel_diff(b.base_logits, ref.base), tol);
        EXPECT_LT(rel_diff(b.logits, ref.logits), tol);
        const auto& kappa = ref.summary["confidence_logits"];
        const auto& props = ref.summary["proposals"];
        for (int64_t d = 0; d < B; ++d) {
            EXPECT_NEAR(b.confidence_logits[size_t(d)], kappa[size_t(d)].get<double>(),
                        tol * std::max(1.0, std::abs(kappa[size_t(d)].get<double>())));
            // Proposals agree where the reference's top two are clearly apart (after a
            // disagreement the chains differ, so stop there).
            std::vector<float> row(ref.logits.begin() + d * V, ref.logits.begin() + (d + 1) * V);
            std::nth_element(row.begin(), row.begin() + 1, row.end(), std::greater<float>());
            if (row[0] - row[1] < 1e-3 * std::max(1.0f, std::abs(row[0]))) break;
            EXPECT_EQ(b.proposals[size_t(d)], props[size_t(d)].get<int32_t>()) << "row " << d;
        }
        const auto& conf = ref.summary["confidence"];
        bool clear = true;
        for (const auto& c : conf) clear = clear && std::abs(c.get<double>() - threshold) > 1e-3;
        if (clear) {
            EXPECT_EQ(size_t(b.cut), ref.summary["proposal"].size());
        }
    }

    test::TempDir dir_;
    std::string trunk_, dspark_;
    std::unique_ptr<Model> model_;
    std::unique_ptr<DsparkHead> head_;
};

TEST_F(DsparkOracleTest, BlockMatchesTheReference) {
    const int64_t n = 30;
    const auto tokens = test::random_token_ids(n, model_->config().n_vocab, 21);
    const auto& targets = head_->info().target_layers;
    std::vector<float> cap(targets.size() * size_t(n) * size_t(model_->info().hidden_size));
    auto seq = model_->new_sequence({.ctx = 256});
    const model::BatchItem it{.seq = seq.get(), .tokens = tokens, .capture = targets, .captured = cap.data()};
    model_->eval(model::Batch(&it, 1));
    ASSERT_GT(n - 1, head_->window());  // the last block's window is full and cut
    for (bool qat : {false, true}) {
        compare(cap, n, n - 1, tokens[size_t(n - 1)], qat, 1e-5);
        compare(cap, n, 6, tokens[6], qat, 1e-5);
    }
}

}  // namespace
}  // namespace ds4::deepseek4
