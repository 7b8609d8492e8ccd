// The imatrix `ds4 --imatrix-dataset` collects on the tiny model, through `ds4-quantize
// --imatrix`, gives the oracle's ggml_quantize_chunk bytes for every expert of an IQ2_XXS and a
// Q2_K tensor, each quantized with its own slice of the collected file; without the imatrix
// the bytes differ.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "quantize/imatrix.h"
#include "support/ggml_ref.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4 {
namespace {

TEST(ImatrixQuantizeOracle, CollectedImatrixQuantizesAsGgml) {
    const oracle::Ggml* ggml = oracle::Ggml::get();
    ASSERT_NE(ggml, nullptr) << oracle::Ggml::reason();
    test::TempDir dir;
    const std::string model = dir.file("tiny.gguf"), dat = dir.file("im.dat");
    const auto g = test::write_tiny_model(model, test::kTinyQ8Io);
    ASSERT_EQ(g.exit_code, 0) << g.output;
    std::ofstream(dir.file("data.txt")) << "===== DS4_IMATRIX_PROMPT 1 =====\n"
                                           "<｜begin▁of▁sentence｜><｜User｜>Tell me about rivers.<｜Assistant｜></think>\n"
                                           "===== DS4_IMATRIX_PROMPT 2 =====\n"
                                           "<｜begin▁of▁sentence｜><｜User｜>for (int i = 0; i < n; ++i) sum += i;<｜Assistant｜>";
    auto r = test::run_command({test::binary("ds4"), "-m", model, "--imatrix-dataset", dir.file("data.txt"),
                                "--imatrix-out", dat, "--threads", "2", "--ctx", "128"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::vector<std::string> quantize = {test::binary("ds4-quantize"), "-q", "--threads", "2", "--in", model,
                                               "--tensor-type", "blk.3.ffn_up_exps.weight=iq2_xxs",
                                               "--tensor-type", "blk.5.ffn_down_exps.weight=q2_k"};
    auto with = quantize, without = quantize;
    with.insert(with.end(), {"--imatrix", dat, "--out", dir.file("im.gguf")});
    without.insert(without.end(), {"--out", dir.file("plain.gguf")});
    ASSERT_EQ((r = test::run_command(with)).exit_code, 0) << r.output;
    ASSERT_EQ((r = test::run_command(without)).exit_code, 0) << r.output;

    const quantize::Imatrix im = quantize::Imatrix::load(dat);
    const auto src = gguf::File::open(model), a = gguf::File::open(dir.file("im.gguf")),
               b = gguf::File::open(dir.file("plain.gguf"));
    for (const char* name : {"blk.3.ffn_up_exps.weight", "blk.5.ffn_down_exps.weight"}) {
        const auto& t = src->tensor(name);
        const auto& q = a->tensor(name);
        const int64_t n = t.ne[0], rows = t.ne[1], E = t.ne[2];
        const size_t per = row_bytes(q.type, n) * size_t(rows);
        EXPECT_NE(std::memcmp(a->data(q), b->data(b->tensor(name)), per * size_t(E)), 0) << name;
        std::vector<uint8_t> want(per);
        for (int64_t e = 0; e < E; ++e) {
            const float* x = reinterpret_cast<const float*>(src->data(t)) + e * rows * n;
            const float* w = im.weights(name, n, E, e);
            ASSERT_NE(w, nullptr) << name;
            ASSERT_EQ(ggml->quantize_chunk(q.type, x, want.data(), rows, n, w), per);
            EXPECT_EQ(std::memcmp(want.data(), a->data(q) + size_t(e) * per, per), 0)
                << name << " (" << tensor_type_name(q.type) << ") expert " << e;
        }
    }
}

}  // namespace
}  // namespace ds4
