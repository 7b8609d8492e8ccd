// The second hardening round (issue 37 item 5), library side: files that must be files are
// checked by type without ever blocking (a FIFO is refused at once, a device is never read
// without bound, a symlink is not followed where it must not be), disk KV files swapped for a
// symlink or a FIFO are refused, a read-only cache directory is reported truthfully, saved
// states with NaN or infinity are refused, a peer that has not authenticated is not called
// authenticated, and expert profiles with impossible counts are refused.
//
// Calls that would block on a FIFO run in a thread with a deadline: when one has not returned
// the FIFO is opened for writing (which releases it) and the test fails instead of hanging.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "common/error.h"
#include "common/file_io.h"
#include "common/log.h"
#include "dist/auth.h"
#include "dist/connection.h"
#include "kvcache_test_util.h"
#include "model/state_file.h"
#include "streaming/profile.h"

namespace {

using namespace kvtest;
using namespace std::chrono_literals;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The message of the ds4::Error `fn` throws within 5 s ("(no error)" when none). A call still
// running then is released by opening `fifo` for writing, and the test fails.
std::string error_within(const std::function<void()>& fn, const std::string& fifo = {}) {
    auto fut = std::async(std::launch::async, [fn] {
        try {
            fn();
        } catch (const std::exception& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    });
    if (fut.wait_for(5s) != std::future_status::ready) {
        ADD_FAILURE() << "blocked (on " << fifo << ")";
        if (!fifo.empty()) {
            const int fd = ::open(fifo.c_str(), O_WRONLY);  // the reader is waiting: no block
            if (fd >= 0) ::close(fd);
        }
    }
    return fut.get();
}

std::string make_fifo(const TempDir& d, const std::string& name) {
    const std::string p = d.path + "/" + name;
    EXPECT_EQ(mkfifo(p.c_str(), 0600), 0) << std::strerror(errno);
    return p;
}

void write_text(const std::string& path, const std::string& s) { std::ofstream(path, std::ios::binary) << s; }

TEST(FileTypes, OpenRegularRefusesFifosDevicesAndLinksWithoutBlocking) {
    TempDir d;
    const std::string fifo = make_fifo(d, "fifo"), file = d.path + "/file", link = d.path + "/link";
    write_text(file, "hello");
    ASSERT_EQ(symlink(file.c_str(), link.c_str()), 0);
    EXPECT_TRUE(contains(error_within([&] { ds4::open_regular(fifo, O_RDONLY); }, fifo),
                         fifo + ": is a FIFO (named pipe), not a regular file"));
    EXPECT_TRUE(contains(error_within([&] { ds4::open_regular("/dev/zero", O_RDONLY); }),
                         "/dev/zero: is a character device, not a regular file"));
    EXPECT_TRUE(contains(error_within([&] { ds4::open_regular(link, O_RDONLY, false); }),
                         link + ": is a symbolic link, not a regular file"));
    const int fd = ds4::open_regular(link, O_RDONLY);  // followed where that is allowed
    ASSERT_GE(fd, 0);
    EXPECT_EQ(fcntl(fd, F_GETFL) & O_NONBLOCK, 0) << "handed back in blocking mode";
    ::close(fd);
    EXPECT_EQ(ds4::read_regular_file(file, 5), "hello");
    EXPECT_TRUE(contains(error_within([&] { ds4::read_regular_file(file, 4); }), "is 5 bytes, more than the 4 allowed"));
}

TEST(FileTypes, ReadFileReadsAWrittenPipeAndRefusesAnUnwrittenFifo) {
    TempDir d;
    const std::string fifo = make_fifo(d, "prompt");
    EXPECT_TRUE(contains(error_within([&] { ds4::read_file(fifo); }, fifo), "is a FIFO (named pipe) that nobody writes to"));
    // With a writer (blocked in its open() until a reader comes), the pipe is read to its end.
    std::thread writer([&] {
        const int fd = ::open(fifo.c_str(), O_WRONLY);
        std::this_thread::sleep_for(100ms);
        (void)!::write(fd, "from a pipe", 11);
        ::close(fd);
    });
    std::this_thread::sleep_for(200ms);  // the writer is waiting in open()
    std::string got;
    EXPECT_EQ(error_within([&] { got = ds4::read_file(fifo); }, fifo), "(no error)");
    writer.join();
    EXPECT_EQ(got, "from a pipe");
}

TEST(FileTypes, DistKeyMustBeABoundedRegularFile) {
    TempDir d;
    const std::string fifo = make_fifo(d, "key");
    for (const auto& [path, want] : {std::pair{fifo, "is a FIFO"}, std::pair{std::string("/dev/zero"), "is a character device"}}) {
        const std::string e = error_within([&] { ds4::dist::load_key(path); }, fifo);
        EXPECT_TRUE(contains(e, "--dist-key " + path + ": cannot read the file: ")) << e;
        EXPECT_TRUE(contains(e, want)) << e;
    }
}

// A peer that only sent the first handshake message has proven nothing.
TEST(FileTypes, AWrongChannelPeerIsNotCalledAuthenticated) {
    using namespace ds4::dist;
    Listener l("127.0.0.1", 0);
    auto acc = std::async(std::launch::async, [&] {
        Socket s = l.accept();
        try {
            authenticate_acceptor(s, DistKey{{'k', 'e', 'y', '-', 'o', 'f', '-', 's', 'i', 'x', 't', 'e', 'e', 'n', '!', '!'}},
                                  Channel::data);
        } catch (const ds4::Error& e) {
            return std::string(e.what());
        }
        return std::string();
    });
    Socket c = connect_to("127.0.0.1", l.port());
    try {  // a different key: it cannot prove anything, and is refused before the proofs
        authenticate_connector(c, DistKey{{'o', 't', 'h', 'e', 'r', '-', 'k', 'e', 'y', '-', 'o', 'f', '-', '1', '6', '!'}},
                               Channel::control);
    } catch (const ds4::Error&) {
    }
    const std::string e = acc.get();
    EXPECT_TRUE(contains(e, "asked to authenticate for the control channel on the data port")) << e;
    EXPECT_TRUE(contains(e, "not authenticated")) << e;
    EXPECT_FALSE(contains(e, " authenticated for")) << e;
}

std::string profile_with(const std::string& count, const std::string& tokens = "10") {
    std::string counts = count;
    for (int e = 1; e < 4; ++e) counts += ",1";
    return R"({"format":"ds4-expert-profile","n_layer":1,"n_expert":4,"tokens":)" + tokens +
           R"(,"layers":[{"layer":0,"counts":[)" + counts + "]}]}";
}

TEST(FileTypes, ExpertProfilesAreBoundedRegularFilesWithPlausibleCounts) {
    TempDir d;
    const std::string fifo = make_fifo(d, "profile.json"), file = d.path + "/p.json";
    for (const std::string& p : {fifo, std::string("/dev/zero")}) {
        const std::string e = error_within([&] { ds4::streaming::hottest_experts(p, 1, 4, -1); }, fifo);
        EXPECT_TRUE(contains(e, "not a regular file")) << e;
    }
    write_text(file, profile_with("3"));
    EXPECT_EQ(ds4::streaming::hottest_experts(file, 1, 4, -1).size(), 4u);
    for (const auto& [count, tokens, want] :
         {std::tuple{"-3", "10", "count -3 is not a whole number"}, std::tuple{"1e999", "10", "not an expert profile"},
          std::tuple{"2.5", "10", "count 2.5 is not a whole number"},
          std::tuple{"99999999999999999999", "10", "is not a whole number"},
          std::tuple{"1000000", "10", "count 1000000 is more than 40"}, std::tuple{"1", "-1", "tokens -1 is not"}}) {
        SCOPED_TRACE(count);
        write_text(file, profile_with(count, tokens));
        const std::string e = error_within([&] { ds4::streaming::hottest_experts(file, 1, 4, -1); });
        EXPECT_TRUE(contains(e, "not an expert profile")) << e;
        EXPECT_TRUE(contains(e, want)) << e;
    }
}

TEST(FileTypes, SingleKvFilesAreRegularOnly) {
    TempDir d;
    const std::string fifo = make_fifo(d, "state.kv");
    // /save: the FIFO stays a FIFO (a device or FIFO was replaced by a regular file).
    const std::string e = error_within(
        [&] { write_file(fifo, "text", payload(10, 1), {SaveReason::manual, 1, 100}, {}, model_a(), 7); }, fifo);
    EXPECT_TRUE(contains(e, "is a FIFO (named pipe), not a regular file")) << e;
    struct stat st {};
    ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode));
    // /load: refused at once instead of waiting for a writer.
    const std::string l = error_within([&] { read_file(fifo, model_a(), 7); }, fifo);
    EXPECT_TRUE(contains(l, "is a FIFO (named pipe), not a regular file")) << l;
}

// A checkpoint swapped for a symlink (or a FIFO) after the scan: never read through, and the
// file the link points to is neither read nor written (its stats record stays as it was).
TEST(KvCacheHardening, AFileSwappedForALinkOrFifoIsRefused) {
    TempDir d, outside;
    DiskCache c(options(d.path, 1 << 20));
    ASSERT_TRUE(c.store("swapped text", payload(100, 1), {SaveReason::cold, 5, 100}, {}));
    const std::string name = file_name("swapped text"), path = d.path + "/" + name;
    const std::string target = outside.path + "/" + name;
    fs::copy_file(path, target);
    const auto before = fs::last_write_time(target);
    std::ifstream in0(target, std::ios::binary);
    const std::string bytes0((std::istreambuf_iterator<char>(in0)), {});
    fs::remove(path);
    ASSERT_EQ(symlink(target.c_str(), path.c_str()), 0);
    const auto hit = c.lookup("swapped text", 100, 0);
    ASSERT_TRUE(hit);
    testing::internal::CaptureStderr();
    EXPECT_FALSE(c.load(*hit));
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_TRUE(contains(err, "removed " + path + ": is a symbolic link")) << err;
    EXPECT_FALSE(fs::is_symlink(fs::symlink_status(path)));
    std::ifstream in1(target, std::ios::binary);
    EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in1)), {}), bytes0) << "written through the link";
    EXPECT_EQ(fs::last_write_time(target), before);
    EXPECT_EQ(c.stats().files, 0u);

    ASSERT_TRUE(c.store("fifo text", payload(100, 2), {SaveReason::cold, 5, 100}, {}));
    const std::string fpath = d.path + "/" + file_name("fifo text");
    fs::remove(fpath);
    ASSERT_EQ(mkfifo(fpath.c_str(), 0600), 0);
    const auto fhit = c.lookup("fifo text", 100, 0);
    ASSERT_TRUE(fhit);
    testing::internal::CaptureStderr();
    std::optional<Entry> got;
    EXPECT_EQ(error_within([&] { got = c.load(*fhit); }, fpath), "(no error)");
    const std::string ferr = testing::internal::GetCapturedStderr();
    EXPECT_FALSE(got);
    EXPECT_TRUE(contains(ferr, "removed " + fpath + ": ")) << ferr;
    EXPECT_FALSE(fs::exists(fs::symlink_status(fpath)));
}

// Runs `body` where the directory refuses writes: as root (who ignores permission bits) in a
// child that drops to `nobody`; otherwise with the directory made read-only. Returns the
// child's failures as text ("" when all held).
template <class F>
std::string as_reader_of_readonly_dir(const std::string& dir, F body) {
    if (geteuid() != 0) {
        fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
        std::string r = body();
        fs::permissions(dir, fs::perms::owner_all);
        return r;
    }
    int p[2];
    if (pipe(p) != 0) return "pipe failed";
    const pid_t pid = fork();
    if (pid == 0) {
        ::close(p[0]);
        std::string r = (setgid(65534) == 0 && setuid(65534) == 0) ? body() : "cannot become nobody";
        (void)!::write(p[1], r.data(), r.size());
        _exit(0);
    }
    ::close(p[1]);
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(p[0], buf, sizeof buf)) > 0) out.append(buf, size_t(n));
    ::close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return out;
}

TEST(KvCacheHardening, AReadOnlyDirectoryIsUsedForLoadingAndReportedTruthfully) {
    TempDir d;
    {
        DiskCache c(options(d.path, 1 << 20));
        ASSERT_TRUE(c.store("good text", payload(100, 1), {SaveReason::cold, 5, 100}, {}));
        ASSERT_TRUE(c.store("bad text", payload(100, 2), {SaveReason::cold, 5, 100}, {}));
    }
    const std::string bad = d.path + "/" + file_name("bad text");
    {
        std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(50);
        f.put('\x5a');
    }
    fs::permissions(d.path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
    for (const auto& e : fs::directory_iterator(d.path))
        fs::permissions(e.path(), fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                      fs::perms::others_read);
    const std::string failures = as_reader_of_readonly_dir(d.path, [&]() -> std::string {
        std::string f;
        ds4::log::reset();
        std::string lines;
        ds4::log::to_callback([&](ds4::log::Level, std::string_view l) { lines += std::string(l) + "\n"; });
        try {
            DiskCache c(options(d.path, 1 << 20));
            if (!contains(lines, "is not writable")) f += "no read-only line: " + lines;
            if (contains(lines, "kv cache: removed")) f += "reported removed: " + lines;
            if (!contains(lines, "ignoring " + bad)) f += "bad file not reported: " + lines;
            if (c.saving_enabled()) f += "saving enabled; ";
            const auto hit = c.lookup("good text and more", 100, 0);
            if (!hit || !c.load(*hit)) f += "the good file did not load; ";
            if (c.store("new text", payload(10, 3), {SaveReason::cold, 5, 100}, {})) f += "stored; ";
        } catch (const std::exception& e) {
            f += std::string("threw: ") + e.what();
        }
        ds4::log::reset();
        return f;
    });
    EXPECT_EQ(failures, "");
    EXPECT_TRUE(fs::exists(bad)) << "the damaged file is still there, as reported";
}

// Saved states never hold NaN or infinity: one that does (a forged file with the checksum
// recomputed) is refused when read.
TEST(StateFileHardening, NonFiniteValuesAreRefused) {
    ds4::model::StateHeader h;
    h.architecture = "test";
    h.n_layer = 1;
    h.range = {0, 0, true};
    h.tokens = {1, 2};
    for (const float bad : {std::nanf(""), INFINITY, -INFINITY}) {
        ds4::model::StateWriter w(h);
        w.begin_layer(0, {});
        const float rows[4] = {1.0f, 2.0f, bad, 4.0f};
        w.floats(rows, 4);
        w.end_layer();
        const std::vector<uint8_t> bytes = w.finish();
        ds4::model::StateReader r(bytes, "forged");
        r.begin_layer(0);
        const std::string e = error_within([&] { r.floats(4, "latent rows"); });
        EXPECT_TRUE(contains(e, "latent rows: value 2 of 4 is not finite")) << e;
    }
    // Saved logits may hold -infinity (a banned token), never NaN.
    h.logits = {0.5f, -INFINITY, 1.0f};
    EXPECT_EQ(ds4::model::StateReader(ds4::model::StateWriter(h).finish(), "banned").header().logits[1], -INFINITY);
    h.logits[1] = std::nanf("");
    const std::vector<uint8_t> nan_logits = ds4::model::StateWriter(h).finish();
    EXPECT_TRUE(contains(error_within([&] { ds4::model::StateReader(nan_logits, "forged"); }), "logits: value 1 of 3"));
}

}  // namespace

namespace {

// Replicas sharing one directory (issue 37 item 1): a file one cache instance stores is found
// and loaded by another that was started before it (each re-reads the directory when it
// changed).
TEST(KvCacheShared, AnotherInstanceFindsWhatOneStored) {
    TempDir d;
    DiskCache a(options(d.path, 1 << 20)), b(options(d.path, 1 << 20));
    const ToolMap tools = {{"call_1", "<｜DSML｜invoke name=\"f\">x</｜DSML｜invoke>"}};
    ASSERT_TRUE(a.store("shared conversation", payload(300, 1), {SaveReason::cold, 7, 100}, tools));
    const auto hit = b.lookup("shared conversation and its next turn", 100, 0);
    ASSERT_TRUE(hit) << "b does not see a's file";
    const auto e = b.load(*hit, "shared conversation and its next turn");
    ASSERT_TRUE(e);
    EXPECT_EQ(e->payload, payload(300, 1));
    EXPECT_EQ(b.tool_blocks(std::vector<std::string>{"call_1"}).size(), 1u);
    // Evicted by b: a forgets it and finds nothing (a miss, not an error).
    fs::remove(d.path + "/" + file_name("shared conversation"));
    EXPECT_FALSE(a.lookup("shared conversation and more", 100, 0));
    EXPECT_EQ(a.stats().files, 0u);
}

// Three processes store, look up and load overlapping conversations in one directory with a
// budget that forces evictions: no load ever meets a damaged or torn file, nothing is removed
// as damaged, and the directory stays within the budget plus what the others were writing.
TEST(KvCacheShared, ThreeProcessesShareADirectorySafely) {
    TempDir d;
    constexpr uint64_t kFile = 24 << 10, kBudget = 6 * kFile;
    std::vector<std::pair<pid_t, int>> kids;
    for (int k = 0; k < 3; ++k) {
        int p[2];
        ASSERT_EQ(pipe(p), 0);
        const pid_t pid = fork();
        if (pid == 0) {
            ::close(p[0]);
            std::string f;
            ds4::log::to_callback([&](ds4::log::Level, std::string_view l) {
                if (contains(std::string(l), "removed") || contains(std::string(l), "ignoring")) f += std::string(l) + "; ";
            });
            try {
                DiskCache c(options(d.path, kBudget));
                uint32_t x = 12345u + uint32_t(k) * 7919u;
                for (int i = 0; i < 150; ++i) {
                    x = x * 1103515245u + 12345u;
                    const int t = int((x >> 16) % 12);
                    const std::string text = "conversation number " + std::to_string(t) + " with its turns";
                    if ((x >> 8) % 3 == 0) {
                        c.store(text, payload(kFile - 400, uint32_t(t)), {SaveReason::cold, 5 + t, 100}, {});
                    } else if (const auto hit = c.lookup(text + " and more", 100, 0)) {
                        if (const auto e = c.load(*hit, text + " and more"); e && e->payload != payload(kFile - 400, uint32_t(t)))
                            f += "wrong payload; ";
                    }
                }
                const Stats s = c.stats();
                if (s.load_failures_checksum + s.load_failures_truncated + s.load_failures_foreign + s.load_failures_io)
                    f += "load failures; ";
            } catch (const std::exception& e) {
                f += std::string("threw: ") + e.what();
            }
            (void)!::write(p[1], f.data(), f.size());
            _exit(0);
        }
        ::close(p[1]);
        kids.emplace_back(pid, p[0]);
    }
    for (auto [pid, fd] : kids) {
        std::string out;
        char buf[4096];
        ssize_t n;
        while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, size_t(n));
        ::close(fd);
        int status = 0;
        waitpid(pid, &status, 0);
        EXPECT_EQ(out, "") << "process " << pid;
    }
    EXPECT_FALSE(has_temp(d.path));
    EXPECT_LE(dir_bytes(d.path), kBudget + 2 * kFile);
    DiskCache again(options(d.path, kBudget));
    EXPECT_LE(dir_bytes(d.path), kBudget);
}

}  // namespace
