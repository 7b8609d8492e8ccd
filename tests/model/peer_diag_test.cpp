// The peer check's diagnostic switches (src/model/deepseek4/peer_diag.h; issue 38): off they
// leave the logits bit for bit as they were; kv_f16 (KV rows rounded to f16) and router_f32 (the
// F16 router's product with f32 activations) each move the logits by a rounding's worth (neither
// nothing nor far); DS4_PEER_DIAG reaches the CLI and refuses an unknown switch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/half.h"
#include "model/deepseek4/peer_diag.h"
#include "model/model.h"
#include "support/tiny_model.h"  // generate_model
#include "support/tool_run.h"

namespace ds4 {
namespace {

using deepseek4::PeerDiag;

// The last position's logits; 20 tokens so the ratio-4 layers store compressed rows too.
std::vector<float> last_logits(model::Model& m, const std::vector<int32_t>& ids) {
    auto seq = m.new_sequence({.ctx = 64});
    std::vector<float> out(m.info().n_vocab);
    model::BatchItem it{seq.get(), ids, model::Logits::Last, out.data()};
    m.eval(model::Batch(&it, 1));
    return out;
}

// Restores the switches a test changed.
struct DiagGuard {
    PeerDiag saved = deepseek4::peer_diag();
    ~DiagGuard() { deepseek4::set_peer_diag(saved); }
};

TEST(PeerDiag, ParsesNamesAndRefusesUnknownOnes) {
    EXPECT_FALSE(deepseek4::parse_peer_diag("").kv_f16);
    EXPECT_TRUE(deepseek4::parse_peer_diag("kv_f16").kv_f16);
    EXPECT_TRUE(deepseek4::parse_peer_diag(",kv_f16,").kv_f16);
    const PeerDiag both = deepseek4::parse_peer_diag("router_f32,kv_f16");
    EXPECT_TRUE(both.kv_f16 && both.router_f32);
    EXPECT_FALSE(deepseek4::parse_peer_diag("kv_f16").router_f32);
    EXPECT_THROW(deepseek4::parse_peer_diag("kv_f16,kv_bf16"), Error);
}

TEST(PeerDiag, RoundToF16IsTheF16RoundTrip) {
    std::vector<float> x = {1.0f, 1.0f + 0x1p-12f, 3.14159265f, -65504.0f, 1e-6f, 70000.0f};
    std::vector<float> want;
    for (float v : x) want.push_back(f16_to_f32(f32_to_f16(v)));
    deepseek4::round_to_f16(x.data(), int64_t(x.size()));
    EXPECT_EQ(std::memcmp(x.data(), want.data(), x.size() * 4), 0);
    EXPECT_EQ(x[1], 1.0f);  // below half an f16 ulp: rounds away
    EXPECT_NE(x[2], 3.14159265f);
}

// Logits off, on (the switch `on`), off again on a tiny model written with `extra` flags: off
// equals off bit for bit; on moves the logits, by less than 5% of their std.
void expect_rounding_sized(const std::vector<std::string>& extra, const PeerDiag& on_diag) {
    test::TempDir dir;
    std::vector<std::string> args = {"--preset", "tiny", "--seed", "38"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto m = model::open(test::generate_model(dir, "tiny.gguf", args), {});
    const std::vector<int32_t> ids = test::random_token_ids(20, 512, 38);
    DiagGuard guard;
    deepseek4::set_peer_diag({});
    const std::vector<float> off = last_logits(*m, ids);
    deepseek4::set_peer_diag(on_diag);
    const std::vector<float> on = last_logits(*m, ids);
    deepseek4::set_peer_diag({});
    const std::vector<float> off_again = last_logits(*m, ids);

    EXPECT_EQ(std::memcmp(off.data(), off_again.data(), off.size() * 4), 0) << "switch off is not the default";
    double mean = 0, var = 0, max_diff = 0;
    for (float v : off) mean += v;
    mean /= double(off.size());
    for (size_t i = 0; i < off.size(); ++i) {
        ASSERT_TRUE(std::isfinite(on[i]));
        var += (off[i] - mean) * (off[i] - mean);
        max_diff = std::max(max_diff, double(std::fabs(on[i] - off[i])));
    }
    const double sd = std::sqrt(var / double(off.size()));
    EXPECT_GT(max_diff, 0.0) << "the switch changed nothing";
    EXPECT_LT(max_diff, 0.05 * sd) << "the switch moved the logits by more than a rounding";
}

TEST(PeerDiag, KvF16MovesTheLogitsByARoundingAndOffIsUnchanged) {
    expect_rounding_sized({}, {.kv_f16 = true});
}

TEST(PeerDiag, RouterF32MovesTheLogitsByARoundingAndOffIsUnchanged) {
    expect_rounding_sized({"--type", "router=f16"}, {.router_f32 = true});
}

TEST(PeerDiag, EnvironmentReachesTheCliAndUnknownSwitchesFail) {
    test::TempDir dir;
    const std::string path = test::generate_model(dir, "tiny.gguf", {"--preset", "tiny", "--seed", "38"});
    test::write_token_ids(dir.file("ids.txt"), test::random_token_ids(20, 512, 5));
    auto run = [&](const std::string& diag, const std::string& out) {
        return test::run_command({"/usr/bin/env", "DS4_PEER_DIAG=" + diag, test::binary("ds4"), "-m", path,
                                  "--token-ids", dir.file("ids.txt"), "--dump-logits-f32", dir.file(out)});
    };
    auto bytes = [&](const std::string& name) {
        std::ifstream in(dir.file(name), std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const auto off = run("", "off.f32"), on = run("kv_f16", "on.f32");
    ASSERT_EQ(off.exit_code, 0) << off.output;
    ASSERT_EQ(on.exit_code, 0) << on.output;
    EXPECT_FALSE(bytes("off.f32").empty());
    EXPECT_NE(bytes("off.f32"), bytes("on.f32"));
    const auto bad = run("kv_bf16", "bad.f32");
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.output.find("unknown switch 'kv_bf16'"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace ds4
