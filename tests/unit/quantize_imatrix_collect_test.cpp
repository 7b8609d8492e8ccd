// The imatrix collector (quantize/imatrix_collect.h) on hand-made rows: per expert the mean
// square of the input (gate/up) and of the route-weighted SwiGLU row (down), counting only the
// tokens routed to it; an expert never chosen keeps a zero count and is written as 1s, as one
// seen fewer than the minimum times; the .dat round-trips through Imatrix::load; and the
// dataset splits at upstream's marker lines.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "quantize/imatrix.h"
#include "quantize/imatrix_collect.h"
#include "support/tool_run.h"

namespace ds4::quantize {
namespace {

TEST(ImatrixCollector, MeansPerExpertCountOnlyItsTokens) {
    ImatrixCollector c;
    const float x1[4] = {1, -2, 3, 0.5f}, x2[4] = {0, 4, -1, 2};
    const float h1[2] = {2, -1}, h2[2] = {0.5f, 3};
    // Layer 3 of 4 experts: token 1 -> experts 0 (w .5) and 2 (w 2); token 2 -> expert 0 (w 1).
    c.add_routed(3, 4, 0, x1, 4, h1, 2, 0.5f);
    c.add_routed(3, 4, 2, x1, 4, h2, 2, 2.0f);
    c.add_routed(3, 4, 0, x2, 4, h2, 2, 1.0f);
    c.add_shared(3, x1, 4, h1, 2);
    c.add_shared(3, x2, 4, h2, 2);
    EXPECT_EQ(c.count(3, 0), 2);
    EXPECT_EQ(c.count(3, 2), 1);
    EXPECT_EQ(c.count(3, 1), 0);  // never routed
    EXPECT_EQ(c.count(0, 0), 0);  // a layer never seen
    EXPECT_EQ(c.routes(), 3);
    EXPECT_EQ(c.gate_up_sums(0, 0), nullptr);
    EXPECT_EQ(c.gate_up_sums(3, 1)[2], 0.0f);

    const Imatrix m = c.imatrix("data.txt", 7);
    EXPECT_EQ(m.entries.size(), 6u);  // gate/up/down, routed and shared, of layer 3 only
    const auto& g = m.entries.at("blk.3.ffn_gate_exps.weight");
    ASSERT_EQ(g.size(), 16u);
    EXPECT_EQ(g, m.entries.at("blk.3.ffn_up_exps.weight"));
    const std::vector<float> g0 = {(1 + 0) / 2.f, (4 + 16) / 2.f, (9 + 1) / 2.f, (0.25f + 4) / 2.f};
    EXPECT_EQ(std::vector<float>(g.begin(), g.begin() + 4), g0);
    EXPECT_EQ(std::vector<float>(g.begin() + 4, g.begin() + 8), std::vector<float>(4, 1.0f));  // expert 1
    EXPECT_EQ(std::vector<float>(g.begin() + 8, g.begin() + 12), (std::vector<float>{1, 4, 9, 0.25f}));
    const auto& d = m.entries.at("blk.3.ffn_down_exps.weight");
    ASSERT_EQ(d.size(), 8u);
    // Expert 0: (0.5 * h1)^2 and (1 * h2)^2; expert 2: (2 * h2)^2.
    EXPECT_EQ(d[0], (1.0f + 0.25f) / 2);
    EXPECT_EQ(d[1], (0.25f + 9.0f) / 2);
    EXPECT_EQ(d[4], 4 * 0.25f);
    EXPECT_EQ(d[5], 4 * 9.0f);
    EXPECT_EQ(d[2], 1.0f);
    EXPECT_EQ(m.entries.at("blk.3.ffn_gate_shexp.weight"), (std::vector<float>{0.5f, 10, 5, 2.125f}));
    EXPECT_EQ(m.entries.at("blk.3.ffn_down_shexp.weight"), (std::vector<float>{2.125f, 5}));

    // The legacy .dat gives the values back exactly, with the trailer.
    test::TempDir dir;
    m.save_legacy(dir.file("im.dat"));
    const Imatrix back = Imatrix::load(dir.file("im.dat"));
    EXPECT_EQ(back.entries, m.entries);
    EXPECT_EQ(back.chunks, 7);
    EXPECT_EQ(back.datasets, std::vector<std::string>{"data.txt"});
    // And the quantizer's per-expert slice is that expert's.
    EXPECT_EQ(back.weights("blk.3.ffn_gate_exps.weight", 4, 4, 2), back.entries.at("blk.3.ffn_gate_exps.weight").data() + 8);
}

TEST(ImatrixCollector, TooFewSamplesGiveOnesAndShapesMustAgree) {
    ImatrixCollector c(2);
    const float x[2] = {3, 4}, h[2] = {1, 2};
    c.add_routed(0, 2, 0, x, 2, h, 2, 1.0f);
    c.add_routed(0, 2, 1, x, 2, h, 2, 1.0f);
    c.add_routed(0, 2, 1, x, 2, h, 2, 1.0f);
    const Imatrix m = c.imatrix("", 1);
    EXPECT_EQ(m.entries.at("blk.0.ffn_gate_exps.weight"), (std::vector<float>{1, 1, 9, 16}));
    EXPECT_THROW(c.add_routed(0, 3, 0, x, 2, h, 2, 1.0f), Error);
    EXPECT_THROW(c.add_routed(0, 2, 2, x, 2, h, 2, 1.0f), Error);
    EXPECT_THROW(c.add_routed(1, 2, -1, x, 2, h, 2, 1.0f), Error);
}

TEST(ImatrixCollector, DatasetSplitsAtMarkerLines) {
    EXPECT_EQ(imatrix_prompts("  just one prompt\n"), std::vector<std::string>{"just one prompt"});
    EXPECT_EQ(imatrix_prompts(""), std::vector<std::string>{});
    const std::string text =
        "preamble, not a prompt\n"
        "\n\n===== DS4_IMATRIX_PROMPT 1 a b c =====\n"
        "<｜User｜>first\nline two<｜Assistant｜>\n"
        "\n\n===== DS4_IMATRIX_PROMPT 2 a b c =====\n"
        "   \n"
        "===== DS4_IMATRIX_PROMPT 3 =====\n"
        "third";
    EXPECT_EQ(imatrix_prompts(text), (std::vector<std::string>{"<｜User｜>first\nline two<｜Assistant｜>", "third"}));
}

}  // namespace
}  // namespace ds4::quantize
