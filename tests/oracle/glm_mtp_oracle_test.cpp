// GLM 5.2's embedded MTP block against the llama.cpp oracle (issue 32 item 3): a generated F32
// glm-dsa file with the block (ds4-gguf-gen --arch glm-dsa --mtp), indexer key LayerNorm epsilon
// 0 as llama.cpp uses, 32 indexer heads (no exact-zero score ties at the top-k boundary), and a
// sequence many times the top-k. Rows pair token x_p with the trunk's output-normed hidden state
// h_{p-1} (h_{-1} = 0) at position p; ds4-oracle --mode mtp runs them through llama.cpp's
// LLAMA_CONTEXT_TYPE_MTP context. glm::MtpHead must agree to 1e-3 x the logit standard deviation
// at every row with identical top-1, and the trunk's normed rows must agree with llama.cpp's.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/glm/model.h"
#include "model/glm/mtp.h"
#include "support/compare.h"
#include "support/tool_run.h"

namespace ds4::oracle {

using namespace ds4::test;
namespace {

constexpr int64_t kPositions = 96;

// Our trunk's output-normed hidden state of every position, [n][n_embd].
std::vector<float> trunk_rows(glm::Model& trunk, glm::MtpHead& head, const std::vector<int32_t>& ids) {
    const int64_t width = trunk.info().hidden_size, n = int64_t(ids.size());
    auto seq = trunk.new_sequence({.ctx = n + 8, .qat = false});
    std::vector<float> raw(size_t(n * width)), h(size_t(n * width));
    const model::BatchItem it{.seq = seq.get(), .tokens = ids, .hidden_want = model::Logits::All, .hidden = raw.data()};
    trunk.eval(model::Batch(&it, 1));
    head.trunk_rows(raw.data(), n, h.data());
    return h;
}

Logits run_head(glm::MtpHead& head, const std::vector<int32_t>& ids, const std::vector<float>& h, int64_t width,
                int64_t n_vocab, int64_t chunk) {
    const int64_t n = int64_t(ids.size());
    std::vector<float> rows(size_t(n * width), 0.0f);  // row 0: h_{-1} = 0
    std::copy(h.begin(), h.end() - width, rows.begin() + width);
    auto seq = head.new_sequence({.ctx = n + 8, .qat = false});
    Logits out;
    out.n_vocab = n_vocab;
    out.n_tokens = n;
    out.values.resize(size_t(n * n_vocab));
    for (int64_t start = 0; start < n; start += chunk) {
        const int64_t m = std::min(chunk, n - start);
        head.eval(*seq, std::span<const int32_t>(ids).subspan(size_t(start), size_t(m)), rows.data() + start * width,
                  nullptr, out.values.data() + start * n_vocab);
    }
    return out;
}

TEST(GlmMtpOracle, EmbeddedBlockMatchesLlamaCppsMtpContext) {
    TempDir dir;
    const std::string path = dir.file("model.gguf");
    const RunResult gen = run_command({binary("ds4-gguf-gen"), "-q", "--arch", "glm-dsa", "-o", path, "--preset",
                                       "tiny", "--mtp", "--indexer-heads", "32", "--indexer-ln-eps", "0",
                                       "--indexer-top-k", "16"});
    ASSERT_EQ(gen.exit_code, 0) << gen.output;
    auto trunk = glm::Model::load(path, {.threads = 2});
    auto head = glm::MtpHead::embedded(*trunk);
    ASSERT_TRUE(head) << "the generated file has no MTP block";
    const int64_t n_vocab = trunk->config().n_vocab, width = trunk->info().hidden_size;
    const std::vector<int32_t> ids = random_token_ids(kPositions, n_vocab, 17);
    write_token_ids(dir.file("ids.txt"), ids);
    const RunResult r = run_command({binary("ds4-oracle"), "-m", path, "--token-ids", dir.file("ids.txt"), "--out",
                                     dir.file("oracle.f32"), "--mode", "mtp", "--chunk", "32", "--threads", "1",
                                     "--dump-hidden", dir.file("hidden.f32")});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const Logits ref = load_logits(dir.file("oracle.f32"), n_vocab);

    const std::vector<float> h = trunk_rows(*trunk, *head, ids);
    const CompareSummary sh = compare_logits(load_logits(dir.file("hidden.f32"), width), Logits{width, kPositions, h}, 1e-3);
    EXPECT_EQ(sh.first_divergence, -1) << "trunk rows: " << describe(sh);

    const Logits ours = run_head(*head, ids, h, width, n_vocab, 32);
    const CompareSummary s = compare_logits(ref, ours, 1e-3);
    EXPECT_EQ(s.first_divergence, -1) << describe(s);
    EXPECT_LE(s.worst_rel_err, 1e-3);
    EXPECT_EQ(s.top1_agreement, 1.0);
    // Chunking does not matter to the head (rows one by one give the same bits).
    EXPECT_EQ(compare_logits(ours, run_head(*head, ids, h, width, n_vocab, 1), 0).worst_max_abs_diff, 0.0);
    std::printf("GLM MTP vs llama.cpp: %s\n", describe(s).c_str());
}

TEST(GlmMtpOracle, AFileWithoutTheBlockHasNoHead) {
    TempDir dir;
    const std::string path = dir.file("model.gguf");
    ASSERT_EQ(run_command({binary("ds4-gguf-gen"), "-q", "--arch", "glm-dsa", "-o", path, "--preset", "tiny"}).exit_code, 0);
    auto trunk = glm::Model::load(path, {.threads = 1});
    EXPECT_EQ(glm::MtpHead::embedded(*trunk), nullptr);
}

}  // namespace
}  // namespace ds4::oracle
