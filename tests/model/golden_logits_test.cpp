// Refactors of the forward pass keep its bits: the logits of generated models (prefill in
// chunks with every row's logits, then token-by-token decode over 320 positions: raw window,
// ratio-4 caches with the indexer's top-k, ratio-128 caches) hash to the values recorded in
// tests/data/golden/logits.txt by the engine as it was before the family-neutral blocks were
// factored out of src/model/deepseek4 (issue 30).
//
// The hashes hold for the kernels of one instruction set and thread count, so each line names
// the ISA it was recorded with; a machine whose best ISA differs skips the case. To record
// again (only after a change that is MEANT to alter the numerics, e.g. a new kernel, or a
// change of ds4-gguf-gen's weights), run the test with DS4_GOLDEN_RECORD=1 and commit the file
// with the reason in the message.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "model/model.h"
#include "model/session.h"
#include "quant/quant.h"
#include "support/tool_run.h"

namespace ds4 {
namespace {

struct Case {
    const char* name;
    std::vector<std::string> gen_args;
    bool qat;
};

const std::vector<Case>& cases() {
    static const std::vector<Case> c = {
        {"tiny-f32-qat", {"--preset", "tiny", "--indexer-heads", "16", "--seed", "11"}, true},
        {"tiny-q2-recipe-noqat",
         {"--preset", "tiny", "--seed", "5", "--type", "gate_up_exps=iq2_xxs", "--type", "down_exps=q2_k", "--type",
          "dense=q8_0", "--type", "shared=q8_0", "--type", "output=q8_0"},
         false},
        {"tiny-q4k-mxfp4-qat",
         {"--preset", "tiny", "--seed", "7", "--type", "gate_up_exps=q4_k", "--type", "down_exps=mxfp4", "--type",
          "dense=mxfp4", "--type", "embd=q4_k"},
         true},
        {"small-f16-qat", {"--preset", "small", "--seed", "3"}, true},
    };
    return c;
}

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ULL) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

// The hash of every logit the case's walk produces: 288 prompt positions in chunks of 96
// (all rows' logits), then 32 decode steps feeding back fixed ids (last row's logits).
uint64_t walk_hash(const std::string& path, bool qat) {
    auto m = model::open(path, {.threads = 2});
    const int64_t V = m->info().n_vocab;
    model::Session s(*m, {.ctx = 512, .prefill_chunk = 96, .qat = qat});
    std::vector<int32_t> ids(288);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 7919 + 13) % uint64_t(V));
    std::vector<float> logits;
    s.eval(ids, &logits, true);
    uint64_t h = fnv1a(logits.data(), logits.size() * sizeof(float));
    for (int i = 0; i < 32; ++i) {
        s.eval({int32_t((i * 104729 + 5) % V)}, &logits);
        h = fnv1a(logits.data(), logits.size() * sizeof(float), h);
    }
    return h;
}

std::string golden_path() { return std::string(DS4_SOURCE_DIR) + "/tests/data/golden/logits.txt"; }

// name -> (isa, hash)
std::map<std::string, std::pair<std::string, std::string>> read_golden() {
    std::map<std::string, std::pair<std::string, std::string>> out;
    std::ifstream f(golden_path());
    std::string line;
    while (std::getline(f, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream in(line);
        std::string name, isa, hash;
        in >> name >> isa >> hash;
        out[name] = {isa, hash};
    }
    return out;
}

TEST(GoldenLogits, ForwardPassBitsAreThoseRecordedBeforeTheRefactor) {
    const std::string isa = quant::isa_name(quant::best_isa());
    test::TempDir dir;
    const bool record = std::getenv("DS4_GOLDEN_RECORD") != nullptr;
    const auto golden = read_golden();
    std::string recorded = "# name isa fnv1a-64 of the logits (tests/model/golden_logits_test.cpp)\n";
    for (const Case& c : cases()) {
        SCOPED_TRACE(c.name);
        std::vector<std::string> args = {test::binary("ds4-gguf-gen"), "-q", "-o", dir.file(std::string(c.name) + ".gguf")};
        args.insert(args.end(), c.gen_args.begin(), c.gen_args.end());
        const auto r = test::run_command(args);
        ASSERT_EQ(r.exit_code, 0) << r.output;
        const std::string hash = fmt::format("{:016x}", walk_hash(args[3], c.qat));
        recorded += fmt::format("{} {} {}\n", c.name, isa, hash);
        if (record) continue;
        const auto it = golden.find(c.name);
        ASSERT_NE(it, golden.end()) << "no golden hash for " << c.name << " in " << golden_path();
        if (it->second.first != isa) {
            GTEST_SKIP() << "golden hashes recorded with " << it->second.first << " kernels; this machine runs "
                         << isa;
        }
        EXPECT_EQ(hash, it->second.second) << "the forward pass's bits changed";
    }
    if (record) {
        std::ofstream(golden_path()) << recorded;
        std::printf("recorded %s\n", golden_path().c_str());
    }
}

}  // namespace
}  // namespace ds4
