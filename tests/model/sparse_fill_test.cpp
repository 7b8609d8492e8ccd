// ds4-gguf-gen's partly filled sparse files (--fill, --fill-experts; tools/ds4-gguf-gen/
// sparse_fill.h; issue 38): the classes asked for hold the bytes the fully written file of the
// same seed holds, the routed experts asked for too and the others are holes; the router's
// bias pins those experts (+8) and the hash layers' tid2eid names only them; and a forward pass
// reads no hole: garbage written over the unfilled experts leaves the logits bit for bit equal.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/model.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4 {
namespace {

constexpr uint32_t kFirst = 2, kLast = 5;  // tiny: 8 experts, 2 used

bool is_expert_tensor(const std::string& n) { return n.find("_exps.weight") != std::string::npos; }

std::vector<float> last_logits(const std::string& path, const std::vector<int32_t>& ids) {
    auto m = model::open(path, {});
    auto seq = m->new_sequence({.ctx = 64});
    std::vector<float> out(m->info().n_vocab);
    model::BatchItem it{seq.get(), ids, model::Logits::Last, out.data()};
    m->eval(model::Batch(&it, 1));
    return out;
}

TEST(SparseFill, FilledClassesAndExpertsPinnedAndNoHoleRead) {
    test::TempDir dir;
    const std::string full = test::generate_model(dir, "full.gguf", {"--preset", "tiny", "--seed", "7"});
    const std::string part = test::generate_model(
        dir, "part.gguf", {"--preset", "tiny", "--seed", "7", "--fill", "nonrouted", "--fill-experts", "2-5"});
    struct stat st {};
    ASSERT_EQ(stat(part.c_str(), &st), 0);
    EXPECT_LT(uint64_t(st.st_blocks) * 512, uint64_t(st.st_size)) << "no holes in the partly filled file";

    auto f = gguf::File::open(full), p = gguf::File::open(part);
    ASSERT_EQ(f->tensors().size(), p->tensors().size());
    int experts_seen = 0, biases_seen = 0, tid2eid_seen = 0;
    for (const gguf::TensorInfo& t : p->tensors()) {
        const gguf::TensorInfo& u = f->tensor(t.name);
        ASSERT_EQ(t.n_bytes, u.n_bytes);
        const uint8_t *a = p->data(t), *b = f->data(u);
        if (is_expert_tensor(t.name)) {
            ++experts_seen;
            const size_t per = t.n_bytes / size_t(t.ne[2]);
            for (size_t e = 0; e < size_t(t.ne[2]); ++e) {
                const bool filled = e >= kFirst && e <= kLast;
                if (filled) {
                    EXPECT_EQ(std::memcmp(a + e * per, b + e * per, per), 0) << t.name << " expert " << e;
                } else {
                    const std::vector<uint8_t> zeros(per);
                    EXPECT_EQ(std::memcmp(a + e * per, zeros.data(), per), 0) << t.name << " expert " << e;
                }
            }
        } else if (t.name.find("exp_probs_b") != std::string::npos) {
            ++biases_seen;
            const auto *x = reinterpret_cast<const float*>(a), *y = reinterpret_cast<const float*>(b);
            for (int64_t e = 0; e < t.ne[0]; ++e)
                EXPECT_EQ(x[e], y[e] + (e >= kFirst && e <= kLast ? 8.0f : 0.0f)) << t.name << " " << e;
        } else if (t.name.find("tid2eid") != std::string::npos) {
            ++tid2eid_seen;
            const auto* ids = reinterpret_cast<const int32_t*>(a);
            for (int64_t i = 0; i < t.n_elements(); ++i) {
                ASSERT_GE(ids[i], int32_t(kFirst)) << t.name;
                ASSERT_LE(ids[i], int32_t(kLast)) << t.name;
            }
        } else {
            EXPECT_EQ(std::memcmp(a, b, t.n_bytes), 0) << t.name << " differs from the fully written file";
        }
    }
    EXPECT_GT(experts_seen, 0);
    EXPECT_GT(biases_seen, 0);
    EXPECT_GT(tid2eid_seen, 0);

    // Garbage (f32 ~3.4e38, NaN-prone) over every unfilled expert: the logits do not move.
    const std::string dirty = dir.file("dirty.gguf");
    std::filesystem::copy_file(part, dirty);
    {
        std::fstream out(dirty, std::ios::in | std::ios::out | std::ios::binary);
        for (const gguf::TensorInfo& t : p->tensors()) {
            if (!is_expert_tensor(t.name)) continue;
            const size_t per = t.n_bytes / size_t(t.ne[2]);
            const std::vector<char> junk(per, char(0x7F));
            for (size_t e = 0; e < size_t(t.ne[2]); ++e) {
                if (e >= kFirst && e <= kLast) continue;
                out.seekp(std::streamoff(p->data_offset() + t.offset + e * per));
                out.write(junk.data(), std::streamsize(per));
            }
        }
    }
    const std::vector<int32_t> ids = test::random_token_ids(12, 512, 9);
    const std::vector<float> clean = last_logits(part, ids), with_junk = last_logits(dirty, ids);
    for (float v : clean) ASSERT_TRUE(std::isfinite(v));
    EXPECT_EQ(std::memcmp(clean.data(), with_junk.data(), clean.size() * 4), 0) << "an unfilled expert was read";
}

TEST(SparseFill, BadRangesAreRefused) {
    test::TempDir dir;
    for (const char* r : {"5-2", "0-8", "3-3", "x"}) {
        const auto res = test::run_command({test::binary("ds4-gguf-gen"), "-q", "--preset", "tiny", "--fill-experts",
                                            r, "-o", dir.file("bad.gguf")});
        EXPECT_NE(res.exit_code, 0) << r;
        EXPECT_NE(res.output.find("--fill-experts"), std::string::npos) << res.output;
    }
    const auto res = test::run_command(
        {test::binary("ds4-gguf-gen"), "-q", "--preset", "tiny", "--fill", "nope", "-o", dir.file("bad.gguf")});
    EXPECT_NE(res.exit_code, 0);
    EXPECT_NE(res.output.find("unknown class 'nope'"), std::string::npos) << res.output;
}

}  // namespace
}  // namespace ds4
