// Requested contexts (issue: hardening, item 8): a context above the model's trained context,
// or one whose state cannot fit in the memory available, is refused before anything is
// reserved, with a message that says what fits; an accepted long context reserves address
// space, not memory (pages are touched as positions are used).
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/context_check.h"
#include "model/deepseek4/model.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4::deepseek4 {
namespace {

std::string generate(const test::TempDir& dir, const std::string& name, const std::vector<std::string>& args) {
    return test::generate_model(dir, name, args);
}

int64_t rss_bytes() {
    std::ifstream in("/proc/self/status");
    std::string key;
    for (std::string line; std::getline(in, line);)
        if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
    return -1;
}

class ContextCheck : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        tiny_ = generate(*dir_, "tiny.gguf", {"--preset", "tiny", "--real-vocab"});  // trained 4096
        long_ = generate(*dir_, "long.gguf", {"--preset", "tiny", "--ctx", "1099511627776"});
    }
    static void TearDownTestSuite() { delete dir_; }
    static test::TempDir* dir_;
    static std::string tiny_, long_;
};
test::TempDir* ContextCheck::dir_ = nullptr;
std::string ContextCheck::tiny_, ContextCheck::long_;

TEST_F(ContextCheck, AboveTheTrainedContextIsRefusedByTheTools) {
    const auto ds4 = test::run_command({test::binary("ds4"), "-m", tiny_, "--ctx", "100000", "-p", "hi", "-n", "1"});
    EXPECT_NE(ds4.exit_code, 0);
    EXPECT_NE(ds4.output.find("--ctx 100000 is above the model's trained context of 4096"), std::string::npos)
        << ds4.output;
    const auto server = test::run_command({test::binary("ds4-server"), "-m", tiny_, "--ctx", "100000",
                                             "--port", "0"});
    EXPECT_NE(server.exit_code, 0);
    EXPECT_NE(server.output.find("trained context of 4096"), std::string::npos) << server.output;
    // At the trained context itself it runs.
    EXPECT_EQ(test::run_command({test::binary("ds4"), "-m", tiny_, "--ctx", "4096", "-p", "hi", "-n", "1",
                                   "--temp", "0"}).exit_code, 0);
}

TEST_F(ContextCheck, MoreThanTheMemoryAvailableSaysWhatFits) {
    // 2^31 positions of the tiny shape need ~0.5 TiB of KV state: refused, not std::bad_alloc.
    const std::string ids = dir_->file("ids.txt");
    test::write_token_ids(ids, {1, 2, 3});
    const auto r = test::run_command({test::binary("ds4"), "-m", long_, "--ctx", "2147483648", "--token-ids",
                                        ids, "-n", "1"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.output.find("at most"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("bad_alloc"), std::string::npos) << r.output;
    auto m = Model::load(long_);
    const int64_t avail = model::available_memory();
    ASSERT_GT(avail, 0);
    try {
        m->new_sequence({.ctx = int64_t(1) << 31});
        FAIL() << "a 2^31-token context was accepted with " << avail << " bytes available";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("of KV state"), std::string::npos) << msg;
        EXPECT_NE(msg.find("at most"), std::string::npos) << msg;
    }
    // What the message offers really is the largest context that fits.
    const model::SequenceOptions opt{.ctx = 1};
    const int64_t fits = model::max_context_for_bytes(*m, opt, avail);
    EXPECT_GT(fits, 4096);
    model::SequenceOptions at = opt, above = opt;
    at.ctx = fits;
    above.ctx = fits + 1;
    EXPECT_LE(m->sequence_bytes(at), avail);
    EXPECT_GT(m->sequence_bytes(above), avail);
    EXPECT_THROW(m->new_sequence({.ctx = (int64_t(1) << 40) + 1}), Error);
}

TEST_F(ContextCheck, ALongContextReservesAddressSpaceNotMemory) {
    auto m = Model::load(long_);
    const model::SequenceOptions opt{.ctx = int64_t(1) << 22};
    const int64_t reserved = m->sequence_bytes(opt);
    ASSERT_GT(reserved, int64_t(1) << 30);  // over 1 GiB for 4M positions of the tiny shape
    const int64_t before = rss_bytes();
    auto seq = m->new_sequence(opt);
    EXPECT_EQ(seq->state_bytes(), reserved);
    const int64_t grown = rss_bytes() - before;
    EXPECT_LT(grown, reserved / 8) << "a new sequence touched " << grown << " of " << reserved << " bytes";
    // A copy (memory snapshot) copies what is used, not the reservation.
    auto copy = seq->clone();
    EXPECT_LT(rss_bytes() - before, reserved / 4);
}

}  // namespace
}  // namespace ds4::deepseek4
