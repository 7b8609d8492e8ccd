// The second hardening round (issue 37 item 5), server side: --trace is created 0600 and never
// through a symlink; a disk KV checkpoint forged with NaN in its KV rows (checksums
// recomputed) is refused at load and removed, and the request is answered as if it were not
// there (it made every matching request fail with an empty HTTP 500, forever).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kvcache/file_format.h"
#include "model/state_file.h"
#include "server_process.h"
#include "support/tool_run.h"

namespace ds4::servertest {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

json chat(const std::vector<std::pair<std::string, std::string>>& turns) {
    json msgs = json::array({{{"role", "system"},
                              {"content", "You are a careful assistant for a team that writes inference engines in C++ "
                                          "and reviews every kernel twice before it lands."}}});
    for (const auto& [role, text] : turns) msgs.push_back({{"role", role}, {"content", text}});
    return {{"messages", msgs}, {"thinking", {{"type", "disabled"}}}, {"temperature", 0}, {"max_tokens", 12}};
}

std::string fresh_dir(const std::string& name) {
    const std::string d = std::string(DS4_SERVER_TEST_DIR) + "/" + name + "-" + std::to_string(getpid());
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

TEST(ServerHardening, TraceFileIsPrivateAndNeverALink) {
    const std::string d = fresh_dir("trace");
    const std::string trace = d + "/trace.jsonl";
    {
        ::umask(022);
        ServerProcess s({"--trace", trace});
        EXPECT_EQ(http("GET", s.url() + "/health").status, 200);
    }
    struct stat st {};
    ASSERT_EQ(::stat(trace.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << std::oct << (st.st_mode & 0777);

    const std::string target = d + "/elsewhere.txt", link = d + "/link.jsonl";
    std::ofstream(target) << "";
    ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
    const auto r = test::run_command({"timeout", "30", test::binary("ds4-server"), "-m", tiny_model(), "--port", "0",
                                      "--trace", link});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(contains(r.output, "--trace: " + link + " is a symbolic link")) << r.output;
    EXPECT_EQ(fs::file_size(target), 0u);
    fs::remove_all(d);
}

// Puts NaN in the first KV row of the first layer section of every checkpoint in `dir`, with
// the state's and the file's checksums recomputed (what a forger with the format spec does).
int forge_nan_rows(const std::string& dir) {
    int forged = 0;
    for (const auto& de : fs::recursive_directory_iterator(dir)) {  // the model's subfolder
        const std::string path = de.path().string();
        if (de.path().extension() != ".kv") continue;
        std::ifstream in(path, std::ios::binary);
        const std::string raw((std::istreambuf_iterator<char>(in)), {});
        kvcache::ModelId id{};
        std::memcpy(id.data(), raw.data() + 24, 16);
        kvcache::Entry e = kvcache::read_file(path, id, model::kStateVersion);
        size_t at = 0;
        {
            model::StateReader r(e.payload, path);
            r.begin_layer(r.header().range.first);
            at = size_t(r.layer_bytes().data() - e.payload.data());
        }
        // A DeepSeek V4 layer section: u32 ratio, u64 raw rows, then the raw rows' floats.
        const float nan = std::nanf("");
        std::memcpy(e.payload.data() + at + 12, &nan, 4);
        const uint64_t sum = XXH3_64bits(e.payload.data(), e.payload.size() - 8);
        std::memcpy(e.payload.data() + e.payload.size() - 8, &sum, 8);
        kvcache::write_file(path, e.text, e.payload,
                            {e.header.reason, int64_t(e.header.tokens), int64_t(e.header.ctx)}, e.tools, id,
                            model::kStateVersion);
        ++forged;
    }
    return forged;
}

TEST(ServerHardening, ACheckpointWithNonFiniteRowsIsRefusedAndRemoved) {
    const std::string dir = fresh_dir("kv-nan");
    const std::vector<std::string> kv = {"--kv-disk-dir", dir, "--kv-cache-min-tokens", "16",
                                         "--kv-cache-boundary-align-tokens", "16", "--kv-cache-boundary-trim-tokens", "4",
                                         "--kv-cache-continued-interval-tokens", "0"};
    const json first = chat({{"user", "Hello there, how are you today? Tell me about caches."}});
    json second;
    std::string expected;
    {
        ServerProcess s(kv);
        const HttpResult a = post(s.url() + "/v1/chat/completions", first);
        ASSERT_EQ(a.status, 200) << a.body;
        second = chat({{"user", "Hello there, how are you today? Tell me about caches."},
                       {"assistant", a.json()["choices"][0]["message"]["content"].get<std::string>()},
                       {"user", "And what about the disk?"}});
        EXPECT_EQ(s.terminate(), 0);
    }
    ASSERT_GT(forge_nan_rows(dir), 0);
    {
        ServerProcess cold;
        const HttpResult r = post(cold.url() + "/v1/chat/completions", second);
        ASSERT_EQ(r.status, 200) << r.body;
        expected = r.json()["choices"][0]["message"]["content"];
    }
    ServerProcess s(kv);
    for (int i = 0; i < 2; ++i) {  // not forever: the second request finds no file to fail on
        const HttpResult r = post(s.url() + "/v1/chat/completions", second);
        ASSERT_EQ(r.status, 200) << r.body << s.log();
        EXPECT_EQ(r.json()["choices"][0]["message"]["content"], expected);
    }
    EXPECT_TRUE(contains(s.log(), "is not finite")) << s.log();
    // The Anthropic shape too, for a request that would match the forged file's text.
    const HttpResult m = post(s.url() + "/v1/messages",
                              json{{"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}});
    EXPECT_EQ(m.status, 200) << m.body;
    s.terminate();
    fs::remove_all(dir);
}

}  // namespace
}  // namespace ds4::servertest
