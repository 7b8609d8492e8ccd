// imatrix collection (`ds4 --imatrix-dataset`, quantize/imatrix_collect.h) on the tiny model:
// the expert observer (model/expert_observer.h) changes no logit and shows each chosen
// expert's SwiGLU row as computed here from the GGUF's F32 weights; the .dat the CLI writes
// holds, per layer and expert, the mean squares computed here in double from the observed
// rows (1s for an expert no token chose); SSD streaming gives the same file; a pipeline role
// is refused; and ds4-quantize --imatrix weighs each expert with its own slice of it. GLM's
// routed layers are observed the same way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/model.h"
#include "model/session.h"
#include "quantize/ggml_quantize.h"
#include "quantize/imatrix.h"
#include "quantize/imatrix_collect.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"
#include "tokenizer/tokenizer.h"

namespace ds4 {
namespace {

// Everything the observer showed, per layer: rows appended in call order.
struct Recorder final : model::ExpertObserver {
    struct Layer {
        int64_t D = 0, F = 0, K = 0, E = 0, FS = 0;
        std::vector<float> x, h, sh, w;
        std::vector<int32_t> chosen;
    };
    std::map<uint32_t, Layer> layers;
    void observe(const model::ExpertRows& r) override {
        Layer& L = layers[r.layer];
        L.D = r.n_embd, L.F = r.ff, L.K = r.n_used, L.E = r.n_expert, L.FS = r.ff_shared;
        L.x.insert(L.x.end(), r.input, r.input + r.n * r.n_embd);
        L.h.insert(L.h.end(), r.hidden, r.hidden + r.n * r.n_used * r.ff);
        L.w.insert(L.w.end(), r.weight, r.weight + r.n * r.n_used);
        L.chosen.insert(L.chosen.end(), r.chosen, r.chosen + r.n * r.n_used);
        if (r.shared_hidden) L.sh.insert(L.sh.end(), r.shared_hidden, r.shared_hidden + r.n * r.ff_shared);
    }
};

// Every position's logits of `ids` in chunks of `chunk`, with `rec` observing (or nothing).
std::vector<float> logits_of(model::Model& m, const std::vector<int32_t>& ids, int64_t chunk, Recorder* rec) {
    model::Session s(m, {.ctx = 64, .prefill_chunk = chunk});
    s.sequence().set_expert_observer(rec);
    std::vector<float> logits;
    s.eval(ids, &logits, true);
    return logits;
}

// Observing leaves every logit as it is; returns what was observed.
Recorder observe_bit_identically(model::Model& m, const std::vector<int32_t>& ids, int64_t chunk) {
    const std::vector<float> plain = logits_of(m, ids, chunk, nullptr);
    Recorder rec;
    const std::vector<float> seen = logits_of(m, ids, chunk, &rec);
    EXPECT_TRUE(plain.size() == seen.size() && std::memcmp(plain.data(), seen.data(), plain.size() * sizeof(float)) == 0)
        << "the observer changed the logits";
    return rec;
}

std::string bytes_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Three prompts (text before the first marker is not one), rendered-chat text.
const char* kDataset =
    "ignored preamble\n"
    "\n\n===== DS4_IMATRIX_PROMPT 1 prose think test =====\n"
    "<｜begin▁of▁sentence｜>You are terse.<｜User｜>Name three rivers of Italy.<｜Assistant｜><think>\n"
    "\n\n===== DS4_IMATRIX_PROMPT 2 code nothink test =====\n"
    "<｜begin▁of▁sentence｜><｜User｜>int main() { return 0; } -- what does it return?<｜Assistant｜></think>\n"
    "\n\n===== DS4_IMATRIX_PROMPT 3 it nothink test =====\n"
    "<｜begin▁of▁sentence｜><｜User｜>Scrivi una storia su una papera.<｜Assistant｜></think>";

class ImatrixCollect : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        model_ = dir_->file("tiny.gguf");
        const auto r = test::write_tiny_model(model_, test::kTinyQ8Io);
        ASSERT_EQ(r.exit_code, 0) << r.output;
        std::ofstream(dir_->file("data.txt")) << kDataset;
    }
    static void TearDownTestSuite() {
        dat_.clear();
        delete dir_;
        dir_ = nullptr;
    }
    static test::RunResult collect(const std::string& out, const std::vector<std::string>& extra = {}) {
        std::vector<std::string> a = {test::binary("ds4"), "-m", model_, "--imatrix-dataset", dir_->file("data.txt"),
                                      "--imatrix-out", out, "--threads", "2", "--ctx", "128"};
        a.insert(a.end(), extra.begin(), extra.end());
        return test::run_command(a);
    }
    // The whole dataset's .dat, collected once for the suite.
    static const std::string& full_dat() {
        if (dat_.empty()) {
            const auto r = collect(dir_->file("im.dat"));
            EXPECT_EQ(r.exit_code, 0) << r.output;
            EXPECT_NE(r.output.find("from 3 prompts"), std::string::npos) << r.output;
            dat_ = dir_->file("im.dat");
        }
        return dat_;
    }
    // The prompts' rows as the observer shows them, each prompt from an empty context, cut
    // to max_tokens tokens in all (0: no limit).
    static Recorder observe_dataset(int64_t max_tokens = 0) {
        auto m = model::open(model_, {.threads = 2});
        const auto tok = tokenizer::Tokenizer::from_gguf(m->file());
        Recorder rec;
        int64_t used = 0;
        for (const std::string& p : quantize::imatrix_prompts(kDataset)) {
            std::vector<int32_t> ids = tok->encode(p, tokenizer::Special::Match);
            if (max_tokens > 0) ids.resize(std::min<size_t>(ids.size(), size_t(max_tokens - used)));
            if (ids.empty()) break;
            used += int64_t(ids.size());
            model::Session s(*m, {.ctx = 128, .prefill_chunk = 5});
            s.sequence().set_expert_observer(&rec);
            s.eval(ids, nullptr);
        }
        return rec;
    }
    static test::TempDir* dir_;
    static std::string model_;
    static inline std::string dat_;
};
test::TempDir* ImatrixCollect::dir_ = nullptr;
std::string ImatrixCollect::model_;

TEST_F(ImatrixCollect, ObservingChangesNoLogitAndShowsTheExpertsSwiglu) {
    auto m = model::open(model_, {.threads = 2});
    const std::vector<int32_t> ids = test::random_token_ids(19, m->info().n_vocab, 3);
    const Recorder rec = observe_bit_identically(*m, ids, 6);
    ASSERT_EQ(rec.layers.size(), m->info().n_layer);

    // Layer 4 (a routed one), every row and chosen expert: silu(min(g, 10)) * clamp(u, +-10)
    // with g, u the expert's gate and up rows times the observed input, in double here.
    const uint32_t il = 4;
    const Recorder::Layer& L = rec.layers.at(il);
    ASSERT_EQ(int64_t(L.x.size()), int64_t(ids.size()) * L.D);
    const auto file = gguf::File::open(model_);
    const auto& gate = file->tensor("blk.4.ffn_gate_exps.weight");
    const auto& up = file->tensor("blk.4.ffn_up_exps.weight");
    ASSERT_EQ(gate.type, TensorType::F32);
    const float* G = reinterpret_cast<const float*>(file->data(gate));
    const float* U = reinterpret_cast<const float*>(file->data(up));
    double worst = 0;
    for (size_t t = 0; t < ids.size(); ++t)
        for (int64_t k = 0; k < L.K; ++k) {
            const int32_t e = L.chosen[t * size_t(L.K) + size_t(k)];
            ASSERT_GE(e, 0);
            ASSERT_LT(e, L.E);
            const float* h = &L.h[(t * size_t(L.K) + size_t(k)) * size_t(L.F)];
            for (int64_t f = 0; f < L.F; ++f) {
                double g = 0, u = 0;
                for (int64_t i = 0; i < L.D; ++i) {
                    const double x = L.x[t * size_t(L.D) + size_t(i)];
                    g += double(G[(e * L.F + f) * L.D + i]) * x;
                    u += double(U[(e * L.F + f) * L.D + i]) * x;
                }
                g = std::min(g, 10.0);
                u = std::clamp(u, -10.0, 10.0);
                const double want = g / (1 + std::exp(-g)) * u;
                worst = std::max(worst, std::abs(want - h[f]) / (1e-3 + std::abs(want)));
            }
        }
    EXPECT_LT(worst, 1e-3) << "an observed SwiGLU row is not the expert's";
}

TEST_F(ImatrixCollect, GlmsRoutedLayersAreObservedTooWithoutChangingALogit) {
    const std::string path = test::generate_model(*dir_, "glm.gguf", {"--arch", "glm-dsa", "--seed", "22"});
    auto m = model::open(path, {.threads = 2});
    const std::vector<int32_t> ids = test::random_token_ids(11, m->info().n_vocab, 4);
    const Recorder rec = observe_bit_identically(*m, ids, 4);
    ASSERT_FALSE(rec.layers.empty());
    for (const auto& [il, L] : rec.layers) {
        EXPECT_LT(il, m->info().n_layer);
        EXPECT_EQ(L.x.size(), ids.size() * size_t(L.D)) << "layer " << il;
        EXPECT_EQ(L.h.size(), ids.size() * size_t(L.K * L.F)) << "layer " << il;
        for (int32_t e : L.chosen) EXPECT_TRUE(e >= 0 && e < L.E) << "layer " << il;
    }
}

TEST_F(ImatrixCollect, TheDatHoldsTheMeanSquaresOfTheObservedRows) {
    const quantize::Imatrix im = quantize::Imatrix::load(full_dat());
    EXPECT_EQ(im.chunks, 3);
    ASSERT_EQ(im.datasets.size(), 1u);
    EXPECT_EQ(im.datasets[0], dir_->file("data.txt"));

    const Recorder rec = observe_dataset();
    ASSERT_EQ(rec.layers.size(), 6u);
    for (const auto& [il, L] : rec.layers) {
        const std::string blk = "blk." + std::to_string(il) + ".";
        const auto& gate = im.entries.at(blk + "ffn_gate_exps.weight");
        ASSERT_EQ(int64_t(gate.size()), L.E * L.D);
        EXPECT_EQ(gate, im.entries.at(blk + "ffn_up_exps.weight"));
        const auto& down = im.entries.at(blk + "ffn_down_exps.weight");
        ASSERT_EQ(int64_t(down.size()), L.E * L.F);
        const size_t T = L.x.size() / size_t(L.D);
        for (int32_t e = 0; e < L.E; ++e) {
            std::vector<double> sx(size_t(L.D), 0.0), sh(size_t(L.F), 0.0);
            int64_t n = 0;
            for (size_t t = 0; t < T; ++t)
                for (int64_t k = 0; k < L.K; ++k) {
                    const size_t slot = t * size_t(L.K) + size_t(k);
                    if (L.chosen[slot] != e) continue;
                    ++n;
                    for (int64_t i = 0; i < L.D; ++i) sx[size_t(i)] += std::pow(double(L.x[t * size_t(L.D) + size_t(i)]), 2);
                    for (int64_t i = 0; i < L.F; ++i)
                        sh[size_t(i)] += std::pow(double(L.w[slot]) * L.h[slot * size_t(L.F) + size_t(i)], 2);
                }
            for (int64_t i = 0; i < L.D; ++i) {
                const double want = n ? sx[size_t(i)] / double(n) : 1.0;
                ASSERT_NEAR(gate[size_t(e * L.D + i)], want, 1e-5 * want + 1e-9) << blk << " expert " << e << " col " << i;
            }
            for (int64_t i = 0; i < L.F; ++i) {
                const double want = n ? sh[size_t(i)] / double(n) : 1.0;
                ASSERT_NEAR(down[size_t(e * L.F + i)], want, 1e-5 * want + 1e-9) << blk << " expert " << e << " col " << i;
            }
        }
        // The shared expert: every token.
        const auto& sdown = im.entries.at(blk + "ffn_down_shexp.weight");
        ASSERT_EQ(int64_t(sdown.size()), L.FS);
        for (int64_t i = 0; i < L.FS; ++i) {
            double s = 0;
            for (size_t t = 0; t < T; ++t) s += std::pow(double(L.sh[t * size_t(L.FS) + size_t(i)]), 2);
            ASSERT_NEAR(sdown[size_t(i)], s / double(T), 1e-5 * s / double(T) + 1e-9) << blk << " shared col " << i;
        }
    }
}

TEST_F(ImatrixCollect, AnExpertNoTokenChoseIsWrittenAsOnes) {
    // Two tokens: at most 2 x 2 of the 8 experts per layer are chosen.
    const std::string out = dir_->file("two.dat");
    const auto r = collect(out, {"--imatrix-max-tokens", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("from 1 prompts, 2 tokens"), std::string::npos) << r.output;
    const quantize::Imatrix im = quantize::Imatrix::load(out);
    const Recorder rec = observe_dataset(2);
    int unrouted = 0;
    for (const auto& [il, L] : rec.layers) {
        ASSERT_EQ(L.x.size(), size_t(2 * L.D));
        const auto& gate = im.entries.at("blk." + std::to_string(il) + ".ffn_gate_exps.weight");
        for (int32_t e = 0; e < L.E; ++e) {
            if (std::find(L.chosen.begin(), L.chosen.end(), e) != L.chosen.end()) {
                EXPECT_NE(gate[size_t(e * L.D)], 1.0f);
                continue;
            }
            ++unrouted;
            for (int64_t i = 0; i < L.D; ++i) ASSERT_EQ(gate[size_t(e * L.D + i)], 1.0f) << "layer " << il << " expert " << e;
        }
    }
    EXPECT_GE(unrouted, 6 * 4);
}

TEST_F(ImatrixCollect, StreamingAndChunkingGiveTheSameFileAndAPipelineIsRefused) {
    const std::string a = dir_->file("resident.dat"), b = dir_->file("streamed.dat");
    ASSERT_EQ(collect(a, {"--imatrix-max-prompts", "2"}).exit_code, 0);
    const auto r = collect(b, {"--imatrix-max-prompts", "2", "--ssd-streaming", "--ssd-streaming-cache-experts", "3"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(bytes_of(a) == bytes_of(b)) << "SSD streaming changed the imatrix";
    // Nor does the prefill chunk: the forward pass is the same bit for bit
    // and the sums run in token order.
    const std::string c = dir_->file("chunked.dat");
    ASSERT_EQ(collect(c, {"--imatrix-max-prompts", "2", "--prefill-chunk", "3"}).exit_code, 0);
    EXPECT_TRUE(bytes_of(a) == bytes_of(c)) << "the prefill chunk changed the imatrix";

    const auto p = collect(dir_->file("pipe.dat"), {"--role", "coordinator", "--layers", "0:2", "--listen", "127.0.0.1", "0"});
    EXPECT_EQ(p.exit_code, 1) << p.output;
    EXPECT_NE(p.output.find("sees only its own layers"), std::string::npos) << p.output;
    EXPECT_FALSE(std::filesystem::exists(dir_->file("pipe.dat")));
    const auto half = test::run_command({test::binary("ds4"), "-m", model_, "--imatrix-out", dir_->file("x.dat")});
    EXPECT_EQ(half.exit_code, 1) << half.output;
    EXPECT_NE(half.output.find("go together"), std::string::npos) << half.output;
}

TEST_F(ImatrixCollect, QuantizeWeighsEachExpertWithItsCollectedSlice) {
    const std::string& dat = full_dat();
    const quantize::Imatrix im = quantize::Imatrix::load(dat);
    const auto src = gguf::File::open(model_);
    const std::vector<std::pair<TensorType, std::string>> types = {{TensorType::Q2_K, "q2_k"}, {TensorType::IQ2_XXS, "iq2_xxs"}};
    for (const auto& [type, name] : types) {
        const std::string with = dir_->file(name + "-im.gguf"), without = dir_->file(name + ".gguf");
        // Only the two checked tensors change type (the rest is copied): quick.
        const std::vector<std::string> base = {test::binary("ds4-quantize"), "-q", "--threads", "2", "--in", model_,
                                               "--tensor-type", "blk.4.ffn_gate_exps.weight=" + name,
                                               "--tensor-type", "blk.5.ffn_down_exps.weight=" + name};
        auto args = base;
        args.insert(args.end(), {"--imatrix", dat, "--out", with});
        auto q = test::run_command(args);
        ASSERT_EQ(q.exit_code, 0) << q.output;
        args = base;
        args.insert(args.end(), {"--out", without});
        q = test::run_command(args);
        ASSERT_EQ(q.exit_code, 0) << q.output;
        const auto a = gguf::File::open(with), b = gguf::File::open(without);
        for (const char* tensor : {"blk.4.ffn_gate_exps.weight", "blk.5.ffn_down_exps.weight"}) {
            const auto& t = src->tensor(tensor);
            const auto& qa = a->tensor(tensor);
            ASSERT_EQ(qa.type, type) << tensor;
            const int64_t n = t.ne[0], rows = t.ne[1];
            const size_t per = row_bytes(type, n) * size_t(rows);
            EXPECT_NE(std::memcmp(a->data(qa), b->data(b->tensor(tensor)), per * size_t(t.ne[2])), 0)
                << name << " " << tensor << ": the imatrix changed nothing";
            std::vector<uint8_t> want(per);
            for (int64_t e = 0; e < t.ne[2]; ++e) {
                const float* x = reinterpret_cast<const float*>(src->data(t)) + e * rows * n;
                quantize::quantize_rows(type, x, want.data(), rows, n, im.weights(tensor, n, t.ne[2], e));
                EXPECT_EQ(std::memcmp(want.data(), a->data(qa) + size_t(e) * per, per), 0)
                    << name << " " << tensor << " expert " << e;
            }
        }
    }
}

}  // namespace
}  // namespace ds4
