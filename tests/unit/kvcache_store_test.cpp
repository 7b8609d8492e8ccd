// The disk KV cache (src/kvcache): round trips, prefix lookup, damaged files, the budget,
// eviction order and concurrent use.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "kvcache_test_util.h"

namespace {

using namespace kvtest;

constexpr uint64_t kBig = uint64_t(1) << 30;

ToolMap two_tools() {
    return {{"call_0123", "<｜DSML｜invoke name=\"f\">x</｜DSML｜invoke>"}, {"toolu_ab", ""}};
}

void flip(const std::string& path, uint64_t at) {
    const int fd = ::open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    uint8_t b = 0;
    ASSERT_EQ(::pread(fd, &b, 1, off_t(at)), 1);
    b ^= 0x10;
    ASSERT_EQ(::pwrite(fd, &b, 1, off_t(at)), 1);
    ::close(fd);
}

TEST(KvCacheStore, RoundTrip) {
    TempDir d;
    const std::string text = "<｜begin▁of▁sentence｜>system prompt and tools";
    const auto pl = payload(5000, 1);
    {
        DiskCache c(options(d.path, kBig));
        ASSERT_TRUE(c.store(text, pl, {SaveReason::cold, 12, 4096}, two_tools()));
        EXPECT_TRUE(fs::exists(d.path + "/" + file_name(text)));
        EXPECT_EQ(file_name(text).size(), 35u);
        const Stats s = c.stats();
        EXPECT_EQ(s.stores, 1u);
        EXPECT_EQ(s.files, 1u);
        EXPECT_EQ(s.total_bytes, dir_bytes(d.path));
        EXPECT_EQ(s.bytes_written, s.total_bytes);
    }
    // A new cache finds it by scanning, and loads it whole.
    DiskCache c(options(d.path, kBig));
    const auto hit = c.lookup(text + "<｜User｜>hello", 8192, 1);
    ASSERT_TRUE(hit);
    EXPECT_EQ(hit->tokens, 12);
    EXPECT_EQ(hit->ctx, 4096);
    EXPECT_EQ(hit->text_bytes, int64_t(text.size()));
    EXPECT_EQ(hit->reason, SaveReason::cold);
    EXPECT_EQ(hit->hits, 0u);
    const auto e = c.load(*hit, text + "<｜User｜>hello");
    ASSERT_TRUE(e);
    EXPECT_EQ(e->text, text);
    EXPECT_EQ(e->payload, pl);
    EXPECT_EQ(e->tools, two_tools());
    EXPECT_EQ(e->header.tokens, 12u);
    EXPECT_EQ(e->header.payload_version, 7u);
    EXPECT_EQ(e->stats.hits, 1u);
    // The hit count was written in place and survives a rescan.
    ASSERT_TRUE(c.load(*hit));
    DiskCache again(options(d.path, kBig));
    const auto h2 = again.lookup(text, 8192, 0);
    ASSERT_TRUE(h2);
    EXPECT_EQ(h2->hits, 2u);
    EXPECT_EQ(again.stats().hits, 0u);
    EXPECT_EQ(c.stats().hits, 2u);
    EXPECT_EQ(c.stats().bytes_read, 2 * dir_bytes(d.path));
    // Tool blocks come from the index, in the order asked, unknown ids left out.
    const std::vector<std::string> ids = {"toolu_ab", "nope", "call_0123"};
    const auto blocks = again.tool_blocks(ids);
    ASSERT_EQ(blocks.size(), 2u);
    EXPECT_EQ(blocks[0], two_tools()[1]);
    EXPECT_EQ(blocks[1], two_tools()[0]);
}

TEST(KvCacheStore, LookupPicksLongestPrefix) {
    TempDir d;
    DiskCache c(options(d.path, kBig));
    const std::string prompt = "AAAA BBBB CCCC DDDD EEEE";
    ASSERT_TRUE(c.store(prompt.substr(0, 4), payload(10, 1), {SaveReason::cold, 2, 100}, {}));
    ASSERT_TRUE(c.store(prompt.substr(0, 9), payload(10, 2), {SaveReason::cold, 4, 100}, {}));
    ASSERT_TRUE(c.store(prompt.substr(0, 14), payload(10, 3), {SaveReason::cold, 6, 200}, {}));
    ASSERT_TRUE(c.store(prompt.substr(0, 19), payload(10, 4), {SaveReason::cold, 3, 100}, {}));
    ASSERT_TRUE(c.store("AAAA XXXX", payload(10, 5), {SaveReason::cold, 4, 100}, {}));
    ASSERT_TRUE(c.store(prompt + " and more", payload(10, 6), {SaveReason::cold, 50, 100}, {}));

    auto longest = [&](int64_t ctx, int64_t min_tokens) -> int64_t {
        const auto h = c.lookup(prompt, ctx, min_tokens);
        return h ? h->text_bytes : -1;
    };
    EXPECT_EQ(longest(1000, 0), 19);  // longer than the prompt never matches
    EXPECT_EQ(longest(1000, 4), 14);  // too few tokens in the 19-byte one
    EXPECT_EQ(longest(150, 4), 9);    // the 14-byte one was written for a bigger ctx
    EXPECT_EQ(longest(150, 5), -1);
    EXPECT_EQ(longest(99, 0), -1);
    EXPECT_FALSE(c.lookup("ZZZZ", 1000, 0));
    EXPECT_EQ(c.stats().misses, 3u);
    // Equal text: more tokens wins (same text, two files cannot exist, so check via replacement).
    ASSERT_TRUE(c.store(prompt.substr(0, 19), payload(10, 4), {SaveReason::continued, 9, 100}, {}));
    const auto h = c.lookup(prompt, 1000, 0);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->tokens, 9);
    EXPECT_EQ(h->reason, SaveReason::continued);
    EXPECT_EQ(c.stats().files, 6u);
}

TEST(KvCacheStore, SameTextReplacedAtomicallyOrKept) {
    TempDir d;
    DiskCache c(options(d.path, kBig));
    ASSERT_TRUE(c.store("abc", payload(100, 1), {SaveReason::cold, 3, 100}, {}));
    const auto before = fs::last_write_time(d.path + "/" + file_name("abc"));
    // The identical snapshot is not rewritten.
    ASSERT_TRUE(c.store("abc", payload(100, 1), {SaveReason::shutdown, 3, 100}, {}));
    EXPECT_EQ(c.stats().stores, 1u);
    EXPECT_EQ(fs::last_write_time(d.path + "/" + file_name("abc")), before);
    // A bigger ctx replaces it.
    ASSERT_TRUE(c.store("abc", payload(300, 2), {SaveReason::cold, 3, 200}, {}));
    EXPECT_EQ(c.stats().stores, 2u);
    EXPECT_EQ(c.stats().files, 1u);
    EXPECT_EQ(c.stats().total_bytes, dir_bytes(d.path));
    const auto e = c.load(*c.lookup("abc", 200, 0));
    ASSERT_TRUE(e);
    EXPECT_EQ(e->payload, payload(300, 2));
}

// Every byte region of the file is covered by a check: a flipped bit makes load() fail, remove
// the file and count the cause.
TEST(KvCacheStore, FlippedBytesAreDetectedAndRemoved) {
    const std::string text = "the cached prompt text";
    const auto pl = payload(777, 3);
    const uint64_t t0 = kHeaderBytes, p0 = t0 + text.size(), m0 = p0 + pl.size();
    const uint64_t tools_bytes = tool_section_bytes(two_tools());
    const uint64_t c0 = m0 + tools_bytes;
    struct Case {
        uint64_t at;
        Cause cause;
    };
    const std::vector<Case> cases = {
        {0, Cause::foreign},      {9, Cause::foreign},      {13, Cause::checksum},
        {30, Cause::checksum},    {45, Cause::checksum},    {66, Cause::checksum},
        {80, Cause::checksum},    {90, Cause::checksum},    {100, Cause::checksum},
        {106, Cause::checksum},   {115, Cause::checksum},   {t0, Cause::checksum},
        {t0 + 5, Cause::checksum}, {p0, Cause::checksum},   {p0 + 400, Cause::checksum},
        {m0, Cause::checksum},    {m0 + 6, Cause::checksum}, {c0 - 1, Cause::checksum},
        {c0, Cause::checksum},    {c0 + 7, Cause::checksum},
    };
    for (const Case& k : cases) {
        SCOPED_TRACE(k.at);
        TempDir d;
        DiskCache c(options(d.path, kBig));
        ASSERT_TRUE(c.store(text, pl, {SaveReason::cold, 5, 100}, two_tools()));
        const std::string path = d.path + "/" + file_name(text);
        flip(path, k.at);
        const auto hit = c.lookup(text, 100, 0);
        ASSERT_TRUE(hit);
        testing::internal::CaptureStderr();
        EXPECT_FALSE(c.load(*hit));
        const std::string err = testing::internal::GetCapturedStderr();
        EXPECT_EQ(err.rfind("ds4: kv cache: removed " + path + ": ", 0), 0u) << err;
        EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
        EXPECT_FALSE(fs::exists(path));
        const Stats s = c.stats();
        EXPECT_EQ(s.files, 0u);
        EXPECT_EQ(s.total_bytes, 0u);
        const uint64_t by_cause[] = {s.load_failures_checksum, s.load_failures_truncated,
                                     s.load_failures_foreign, s.load_failures_io};
        EXPECT_EQ(by_cause[int(k.cause)], 1u) << cause_name(k.cause);
        EXPECT_EQ(s.load_failures_checksum + s.load_failures_truncated + s.load_failures_foreign +
                      s.load_failures_io,
                  1u);
    }
}

TEST(KvCacheStore, DamagedHeaderRemovedAtScan) {
    TempDir d;
    {
        DiskCache c(options(d.path, kBig));
        ASSERT_TRUE(c.store("one", payload(50, 1), {SaveReason::cold, 1, 100}, two_tools()));
        ASSERT_TRUE(c.store("two", payload(50, 2), {SaveReason::cold, 1, 100}, two_tools()));
        ASSERT_TRUE(c.store("three", payload(50, 3), {SaveReason::cold, 1, 100}, {}));
    }
    flip(d.path + "/" + file_name("one"), 50);                       // header
    flip(d.path + "/" + file_name("two"), kHeaderBytes + 3 + 50 + 9);  // tool map
    fs::rename(d.path + "/" + file_name("three"), d.path + "/" + std::string(32, 'a') + ".kv");
    {
        std::ofstream junk(d.path + "/notes.txt");
        junk << "not ours";
    }
    testing::internal::CaptureStderr();
    DiskCache c(options(d.path, kBig));
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 3) << err;
    EXPECT_NE(err.find("header checksum mismatch"), std::string::npos) << err;
    EXPECT_NE(err.find("tool map checksum mismatch"), std::string::npos) << err;
    EXPECT_NE(err.find("name does not match"), std::string::npos) << err;
    EXPECT_EQ(c.stats().files, 0u);
    std::vector<std::string> names;
    dir_bytes(d.path, &names);
    EXPECT_EQ(names, std::vector<std::string>{"notes.txt"});  // files not ours stay
}

TEST(KvCacheStore, DamagedStatsOnlyResetTheStats) {
    TempDir d;
    DiskCache c(options(d.path, kBig));
    ASSERT_TRUE(c.store("text", payload(50, 1), {SaveReason::cold, 1, 100}, {}));
    ASSERT_TRUE(c.load(*c.lookup("text", 100, 0)));
    ASSERT_TRUE(c.load(*c.lookup("text", 100, 0)));
    const std::string path = d.path + "/" + file_name("text");
    flip(path, fs::file_size(path) - 3);
    DiskCache again(options(d.path, kBig));
    const auto hit = again.lookup("text", 100, 0);
    ASSERT_TRUE(hit);
    EXPECT_EQ(hit->hits, 0u);
    const auto e = again.load(*hit);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->stats.hits, 1u);
}

TEST(KvCacheStore, TruncatedOrExtendedFilesAreRemoved) {
    const std::string text = "truncate me";
    const auto pl = payload(3000, 4);
    const uint64_t full = file_bytes(text.size(), pl.size(), 4);
    for (uint64_t len : {uint64_t(0), uint64_t(7), uint64_t(119), uint64_t(120), uint64_t(140), uint64_t(2000),
                         full - 29, full - 21, full - 20, full - 1, full + 1, full + 100}) {
        SCOPED_TRACE(len);
        TempDir d;
        DiskCache c(options(d.path, kBig));
        ASSERT_TRUE(c.store(text, pl, {SaveReason::cold, 5, 100}, {}));
        const std::string path = d.path + "/" + file_name(text);
        ASSERT_EQ(fs::file_size(path), full);
        fs::resize_file(path, len);
        const auto hit = c.lookup(text, 100, 0);
        ASSERT_TRUE(hit);
        testing::internal::CaptureStderr();
        EXPECT_FALSE(c.load(*hit));
        testing::internal::GetCapturedStderr();
        EXPECT_FALSE(fs::exists(path));
        EXPECT_EQ(c.stats().load_failures_truncated, 1u);
        // And at scan.
        ASSERT_TRUE(c.store(text, pl, {SaveReason::cold, 5, 100}, {}));
        fs::resize_file(path, len);
        testing::internal::CaptureStderr();
        DiskCache again(options(d.path, kBig));
        const std::string err = testing::internal::GetCapturedStderr();
        EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
        EXPECT_FALSE(fs::exists(path));
    }
}

TEST(KvCacheStore, ForeignModelOrVersionRemovedAtScan) {
    TempDir d;
    {
        DiskCache c(options(d.path, kBig, model_a(), 7));
        ASSERT_TRUE(c.store("a prompt", payload(50, 1), {SaveReason::cold, 1, 100}, {}));
        ASSERT_TRUE(c.store("another", payload(50, 1), {SaveReason::cold, 1, 100}, {}));
    }
    {
        // Same model, same version: kept.
        testing::internal::CaptureStderr();
        DiskCache c(options(d.path, kBig, model_a(), 7));
        EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
        EXPECT_EQ(c.stats().files, 2u);
    }
    {
        testing::internal::CaptureStderr();
        DiskCache c(options(d.path, kBig, model_a(), 8));
        const std::string err = testing::internal::GetCapturedStderr();
        EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 2) << err;
        EXPECT_NE(err.find("state payload version 7, expected 8"), std::string::npos) << err;
        EXPECT_EQ(c.stats().files, 0u);
        ASSERT_TRUE(c.store("a prompt", payload(50, 1), {SaveReason::cold, 1, 100}, {}));
    }
    testing::internal::CaptureStderr();
    DiskCache c(options(d.path, kBig, model_b(), 8));
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("written by another model"), std::string::npos) << err;
    EXPECT_EQ(c.stats().files, 0u);
    EXPECT_EQ(dir_bytes(d.path), 0u);
}

// Random stores of varying sizes: the directory never holds more than the budget, and the file
// just stored is there unless it alone is too big.
TEST(KvCacheStore, RandomStoresStayWithinBudget) {
    TempDir d;
    const uint64_t budget = 200000;
    DiskCache c(options(d.path, budget));
    std::mt19937 rng(42);
    int too_big = 0, evicted_any = 0;
    for (int i = 0; i < 300; ++i) {
        std::string text = "p";
        text += std::to_string(rng() % 40);
        text.append(rng() % 300, 'x');
        const size_t n = size_t(rng() % 90000) + (rng() % 20 == 0 ? 150000 : 0);
        const auto pl = payload(n, uint32_t(i));
        const StoreMeta meta{SaveReason::continued, int64_t(rng() % 5000), int64_t(1000 + rng() % 3)};
        const uint64_t size = file_bytes(text.size(), n, 4);
        const uint64_t evictions = c.stats().evictions;
        const bool ok = c.store(text, pl, meta, {});
        const uint64_t real = dir_bytes(d.path);
        ASSERT_LE(real, budget) << i;
        ASSERT_EQ(real, c.stats().total_bytes) << i;
        ASSERT_FALSE(has_temp(d.path));
        if (size > budget) {
            EXPECT_FALSE(ok);
            ++too_big;
            continue;
        }
        ASSERT_TRUE(ok) << i;
        ASSERT_TRUE(fs::exists(d.path + "/" + file_name(text))) << i;
        ASSERT_EQ(fs::file_size(d.path + "/" + file_name(text)), size);
        if (c.stats().evictions > evictions) ++evicted_any;
        // Occasionally load something so hit counts take part in the scores.
        if (i % 7 == 0) {
            const auto h = c.lookup(text + "more", 2000, 0);
            ASSERT_TRUE(h);
            ASSERT_TRUE(c.load(*h));
        }
    }
    EXPECT_GT(too_big, 0);
    EXPECT_GT(evicted_any, 50);
    // A smaller budget at the next start evicts down to it.
    DiskCache smaller(options(d.path, budget / 4));
    EXPECT_LE(dir_bytes(d.path), budget / 4);
    EXPECT_EQ(dir_bytes(d.path), smaller.stats().total_bytes);
}

TEST(KvCacheStore, EvictionFollowsTheScore) {
    EXPECT_DOUBLE_EQ(eviction_score(0, 0, 100, 1000, 5), 0.1);
    EXPECT_DOUBLE_EQ(eviction_score(4, 1000, 100, 1000, 1000 + 6 * 3600), (2.0 + 1) * 0.1);
    EXPECT_DOUBLE_EQ(eviction_score(1, 0, 100, 1000, 100 * 3600), 0.1);  // decayed below 0.01

    TempDir d;
    const auto pl = payload(1000, 9);
    const uint64_t one = file_bytes(2, pl.size(), 4);
    DiskCache c(options(d.path, 3 * one));
    ASSERT_TRUE(c.store("AA", pl, {SaveReason::cold, 100, 10}, {}));
    ASSERT_TRUE(c.store("BB", pl, {SaveReason::cold, 50, 10}, {}));
    ASSERT_TRUE(c.store("CC", pl, {SaveReason::cold, 80, 10}, {}));
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.load(*c.lookup("BB", 10, 0)));  // (3+1)*50 = 200
    auto names = [&] {
        std::set<std::string> s;
        for (const Hit& h : c.entries()) s.insert(h.file);
        return s;
    };
    ASSERT_TRUE(c.store("DD", pl, {SaveReason::cold, 1000, 10}, {}));  // evicts CC (80)
    EXPECT_EQ(names(), (std::set<std::string>{file_name("AA"), file_name("BB"), file_name("DD")}));
    ASSERT_TRUE(c.store("EE", pl, {SaveReason::cold, 1, 10}, {}));  // evicts AA (100)
    EXPECT_EQ(names(), (std::set<std::string>{file_name("BB"), file_name("DD"), file_name("EE")}));
    ASSERT_TRUE(c.store("FF", pl, {SaveReason::cold, 1, 10}, {}));  // evicts EE (1), never itself
    EXPECT_EQ(names(), (std::set<std::string>{file_name("BB"), file_name("DD"), file_name("FF")}));
    EXPECT_EQ(c.stats().evictions, 3u);

    // Equal scores: the older last use goes first (stats records written by hand).
    TempDir d2;
    {
        DiskCache w(options(d2.path, kBig));
        for (const char* t : {"XX", "YY", "ZZ"}) ASSERT_TRUE(w.store(t, pl, {SaveReason::cold, 10, 10}, {}));
    }
    const std::pair<const char*, uint64_t> last_used[] = {{"XX", 3000}, {"YY", 1000}, {"ZZ", 2000}};
    for (const auto& [t, when] : last_used) {
        const std::string path = d2.path + "/" + file_name(t);
        const auto rec = encode_stats({0, when});
        const int fd = ::open(path.c_str(), O_RDWR);
        ASSERT_EQ(::pwrite(fd, rec.data(), rec.size(), off_t(fs::file_size(path) - kStatsBytes)), off_t(rec.size()));
        ::close(fd);
    }
    DiskCache e(options(d2.path, 2 * one));  // must evict one at start
    std::set<std::string> left;
    for (const Hit& h : e.entries()) left.insert(h.file);
    EXPECT_EQ(left, (std::set<std::string>{file_name("XX"), file_name("ZZ")}));
}

TEST(KvCacheStore, TwoThreadsStoreAndLoad) {
    TempDir d;
    const uint64_t budget = 400000;
    DiskCache c(options(d.path, budget));
    auto work = [&](int who) {
        std::mt19937 rng{static_cast<uint32_t>(who)};
        for (int i = 0; i < 150; ++i) {
            // Half the texts are shared by both threads.
            std::string text = "shared prefix ";
            text += std::to_string(rng() % 12);
            if (rng() % 2) text += who == 1 ? "/1" : "/2";
            const size_t n = size_t(rng() % 40000);
            if (rng() % 2) {
                c.store(text, payload(n, uint32_t(n)), {SaveReason::continued, int64_t(n % 97), 100}, two_tools());
            } else if (const auto h = c.lookup(text + " tail", 100, 0)) {
                if (const auto e = c.load(*h)) {
                    EXPECT_TRUE((text + " tail").starts_with(e->text));
                    EXPECT_EQ(e->payload, payload(e->payload.size(), uint32_t(e->payload.size())));
                }
            }
            const std::vector<std::string> ids = {"call_0123"};
            c.tool_blocks(ids);
        }
    };
    std::thread a(work, 1), b(work, 2);
    a.join();
    b.join();
    const Stats s = c.stats();
    EXPECT_LE(dir_bytes(d.path), budget);
    EXPECT_EQ(dir_bytes(d.path), s.total_bytes);
    EXPECT_GT(s.stores, 0u);
    EXPECT_GT(s.hits, 0u);
    EXPECT_EQ(s.load_failures_checksum + s.load_failures_truncated + s.load_failures_io, 0u);
    EXPECT_FALSE(has_temp(d.path));
}

TEST(KvCacheFile, WriteAndReadOneFile) {
    TempDir d;
    const std::string path = d.path + "/session.kv";
    const auto pl = payload(12345, 5);
    write_file(path, "conversation", pl, {SaveReason::manual, 44, 2048}, two_tools(), model_a(), 3);
    const Entry e = read_file(path, model_a(), 3);
    EXPECT_EQ(e.text, "conversation");
    EXPECT_EQ(e.payload, pl);
    EXPECT_EQ(e.tools, two_tools());
    EXPECT_EQ(e.header.reason, SaveReason::manual);
    EXPECT_EQ(e.header.tokens, 44u);
    EXPECT_EQ(e.header.ctx, 2048u);
    // Replaced whole, no temporary left.
    write_file(path, "other", {}, {SaveReason::manual, 1, 2048}, {}, model_a(), 3);
    EXPECT_EQ(read_file(path, model_a(), 3).text, "other");
    EXPECT_FALSE(has_temp(d.path));
    try {
        read_file(path, model_b(), 3);
        ADD_FAILURE() << "foreign model read";
    } catch (const FormatError& err) {
        EXPECT_EQ(err.cause(), Cause::foreign);
    }
    try {
        read_file(d.path + "/missing.kv", model_a(), 3);
        ADD_FAILURE() << "missing file read";
    } catch (const FormatError& err) {
        EXPECT_EQ(err.cause(), Cause::io);
        EXPECT_NE(std::string(err.what()).find("missing.kv"), std::string::npos);
    }
    EXPECT_THROW(write_file(d.path + "/no/such/dir/x.kv", "t", {}, {}, {}, model_a(), 3), ds4::Error);
}

}  // namespace
