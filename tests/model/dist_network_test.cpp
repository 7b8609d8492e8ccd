// The pipeline over a network (docs/DISTRIBUTED.md, "Timeouts" and "Tests"): the coordinator
// and the workers in separate network namespaces joined by a bridge, as on separate machines.
// With 32-bit activations and --dist-key the logits equal one process's bit for bit with 2 and
// 3 processes; a wrong key fails on both sides; a worker whose host vanishes (its link goes
// down: no FIN, no RST) fails a generation within --dist-timeout and drops out of a waiting
// coordinator's route. On loopback: a stopped worker (its kernel still ACKs) fails the
// coordinator within --dist-timeout, and silent connections to a worker's or coordinator's port
// (and one that stalls in its first frame) are closed after the handshake timeout, at most 16
// waiting at once, while real peers are served.
//
// The namespaces are this test's own ("ds4t-<pid>-<n>-c", "...-w1", ...; addresses
// 10.213.x.y/24 that exist only inside them) and are deleted at the end of each test, failed or
// not. Without the right to create them (not root, no CAP_NET_ADMIN, no `ip`), those tests are
// skipped with the reason.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dist/connection.h"
#include "support/child_process.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4 {
namespace {

using namespace std::chrono_literals;
using test::contains;
using test::eventually;
using test::Proc;
using test::slurp;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// `ip` from iproute2, as an absolute path for Proc; empty when not installed.
std::string ip_binary() {
    for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
        if (access(p, X_OK) == 0) return p;
    return {};
}

// Namespaces of this process: "c" (the coordinator, with a bridge br0 at 10.213.S.1) and
// "w1".."wN" (workers, eth0 at 10.213.S.(i+1), the other end of its veth a port of br0). Only
// names and addresses made here are ever used; all are deleted on destruction.
class NetnsLab {
public:
    explicit NetnsLab(int workers) {
        static std::atomic<int> serial{0};
        ip_ = ip_binary();
        if (ip_.empty()) throw std::runtime_error("`ip` (iproute2) is not installed");
        prefix_ = "ds4t-" + std::to_string(getpid()) + "-" + std::to_string(serial++);
        subnet_ = "10.213." + std::to_string(getpid() % 250);
        try {
            add_ns("c");
            ip({"-n", ns(0), "link", "add", "br0", "type", "bridge"});
            ip({"-n", ns(0), "addr", "add", addr(0) + "/24", "dev", "br0"});
            ip({"-n", ns(0), "link", "set", "br0", "up"});
            for (int i = 1; i <= workers; ++i) {
                add_ns(fmt::format("w{}", i));
                const std::string port = fmt::format("vw{}", i);
                ip({"-n", ns(0), "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns(i)});
                ip({"-n", ns(0), "link", "set", port, "master", "br0"});
                ip({"-n", ns(0), "link", "set", port, "up"});
                ip({"-n", ns(i), "addr", "add", addr(i) + "/24", "dev", "eth0"});
                ip({"-n", ns(i), "link", "set", "eth0", "up"});
            }
        } catch (...) {
            cleanup();
            throw;
        }
    }
    ~NetnsLab() { cleanup(); }
    NetnsLab(const NetnsLab&) = delete;
    NetnsLab& operator=(const NetnsLab&) = delete;

    // 0: the coordinator's namespace, i: worker i's.
    std::string ns(int i) const { return prefix_ + (i == 0 ? "-c" : "-w" + std::to_string(i)); }
    std::string addr(int i) const { return subnet_ + "." + std::to_string(i + 1); }
    // argv run inside namespace i (`ip netns exec` execs it: the child's pid is the program's).
    std::vector<std::string> in(int i, std::vector<std::string> argv) const {
        std::vector<std::string> a = {ip_, "netns", "exec", ns(i)};
        a.insert(a.end(), argv.begin(), argv.end());
        return a;
    }
    // Worker i's host vanishes: its link goes down, nothing is sent (no FIN, no RST).
    void pull_cable(int i) { ip({"-n", ns(i), "link", "set", "eth0", "down"}); }

private:
    void ip(const std::vector<std::string>& args) {
        std::vector<std::string> a = {ip_};
        a.insert(a.end(), args.begin(), args.end());
        const auto r = test::run_command(a);
        if (r.exit_code != 0) {
            std::string cmd;
            for (const auto& s : a) cmd += s + " ";
            throw std::runtime_error(cmd + "failed: " + r.output);
        }
    }
    void add_ns(const std::string& name) {
        ip({"netns", "add", prefix_ + "-" + name});
        made_.push_back(prefix_ + "-" + name);
        ip({"-n", made_.back(), "link", "set", "lo", "up"});
    }
    void cleanup() {
        // Deleting a namespace removes its links (the veth pairs and the bridge with them).
        for (auto it = made_.rbegin(); it != made_.rend(); ++it) test::run_command({ip_, "netns", "del", *it});
        made_.clear();
    }

    std::string ip_, prefix_, subnet_;
    std::vector<std::string> made_;
};

// A raw TCP connection to 127.0.0.1:port that sends nothing; -1 when connect fails.
int silent_connection(uint16_t port) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

// Whether the other side closed fd (end of stream or reset) within timeout_s.
bool closed_by_peer(int fd, double timeout_s) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, int(timeout_s * 1000)) <= 0) return false;
    char c;
    return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

class DistNetwork : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        model_ = test::generate_model(*dir_, "tiny.gguf", {"--preset", "tiny", "--seed", "5"});
        ids_ = dir_->file("ids.txt");
        test::write_token_ids(ids_, test::random_token_ids(100, 512, 11));
        key_a_ = dir_->file("key_a");
        key_b_ = dir_->file("key_b");
        std::ofstream(key_a_) << "0123456789abcdef0123456789abcdef\n";
        std::ofstream(key_b_) << "fedcba9876543210fedcba9876543210\n";
    }
    static void TearDownTestSuite() { delete dir_; }

    std::string file(const std::string& name) const { return dir_->file(name); }

    // The namespaces for `workers` workers, or a skip saying why they cannot be made.
    std::unique_ptr<NetnsLab> lab(int workers) {
        try {
            return std::make_unique<NetnsLab>(workers);
        } catch (const std::exception& e) {
            why_no_lab_ = e.what();
            return nullptr;
        }
    }

    std::vector<std::string> worker_args(const std::string& layers, const std::string& coord_host, uint16_t coord_port,
                                         const std::string& listen_host, std::vector<std::string> extra) const {
        std::vector<std::string> a = {test::binary("ds4"), "-m", model_, "-t", "1", "--role", "worker", "--layers",
                                      layers, "--coordinator", coord_host, std::to_string(coord_port), "--listen",
                                      listen_host, "0"};
        a.insert(a.end(), extra.begin(), extra.end());
        return a;
    }
    std::vector<std::string> coordinator_args(const std::string& layers, const std::string& host, uint16_t port,
                                              std::vector<std::string> extra) const {
        std::vector<std::string> a = {test::binary("ds4"), "-m", model_, "-t", "1", "--role", "coordinator",
                                      "--layers", layers, "--listen", host, std::to_string(port),
                                      "--dist-route-timeout", "30"};
        a.insert(a.end(), extra.begin(), extra.end());
        return a;
    }
    std::unique_ptr<Proc> proc(const std::vector<std::string>& argv, const std::string& name) const {
        return std::make_unique<Proc>(argv, file(name + ".out"), file(name + ".err"));
    }

    // One process's logits at every position and 8 greedy ids after them.
    std::string reference(const std::string& prefill_chunk) {
        return test::one_process_reference(test::binary("ds4"), model_, ids_, file("ref" + prefill_chunk),
                                             prefill_chunk);
    }

    // The coordinator (layers coord_layers) in namespace c and one worker per entry of
    // worker_layers in w1, w2, ..., all with the same key: logits and greedy ids equal one
    // process's.
    void expect_same_as_one_process(const std::vector<std::string>& worker_layers, const std::string& coord_layers,
                                    const std::string& prefill_chunk, const std::string& dist_chunk) {
        const std::string ref = reference(prefill_chunk);
        auto net = lab(int(worker_layers.size()));
        if (!net) GTEST_SKIP() << "cannot create network namespaces: " << why_no_lab_;
        const uint16_t port = 4000;  // the namespaces are ours: any port is free there
        std::vector<std::unique_ptr<Proc>> ws;
        for (size_t i = 0; i < worker_layers.size(); ++i)
            ws.push_back(proc(net->in(int(i) + 1, worker_args(worker_layers[i], net->addr(0), port, "0.0.0.0",
                                                             {"--dist-key", key_a_})),
                              "w" + std::to_string(i + 1)));
        auto c = proc(net->in(0, coordinator_args(coord_layers, net->addr(0), port,
                                                  {"--dist-key", key_a_, "--token-ids", ids_, "--dump-logits-f32",
                                                   file("got.f32"), "-n", "8", "--prefill-chunk", prefill_chunk,
                                                   "--dist-prefill-chunk", dist_chunk})),
                      "c");
        ASSERT_EQ(c->wait(60), 0) << c->err() << ws[0]->err();
        // The route runs over the namespaces' addresses, not loopback.
        EXPECT_TRUE(contains(c->err(), "route complete")) << c->err();
        for (size_t i = 0; i < ws.size(); ++i)
            EXPECT_TRUE(contains(c->err(), "worker " + net->addr(int(i) + 1) + ":")) << c->err();
        EXPECT_EQ(c->out(), ref);
        const std::string want = slurp(file("ref" + prefill_chunk + ".f32")), got = slurp(file("got.f32"));
        EXPECT_EQ(want.size(), size_t(100) * 512 * 4);
        EXPECT_TRUE(want == got) << "logits differ from the single process";
        for (auto& w : ws) EXPECT_TRUE(w->running()) << w->err();
    }

    static inline test::TempDir* dir_ = nullptr;
    static inline std::string model_, ids_, key_a_, key_b_;
    std::string why_no_lab_;
};

TEST_F(DistNetwork, TwoProcessesInNamespacesEqualOneBitForBit) {
    expect_same_as_one_process({"3:output"}, "0:2", "16", "0");
}

TEST_F(DistNetwork, ThreeProcessesInNamespacesEqualOneBitForBit) {
    // Pipelined 7-token WORKs; worker 1 forwards to worker 2 across the bridge.
    expect_same_as_one_process({"2:3", "4:output"}, "0:1", "512", "7");
}

TEST_F(DistNetwork, AWrongKeyAcrossNamespacesFailsOnBothSides) {
    auto net = lab(1);
    if (!net) GTEST_SKIP() << "cannot create network namespaces: " << why_no_lab_;
    auto w = proc(net->in(1, worker_args("3:output", net->addr(0), 4000, "0.0.0.0", {"--dist-key", key_b_})), "w");
    auto c = proc(net->in(0, coordinator_args("0:2", net->addr(0), 4000,
                                              {"--dist-key", key_a_, "--dist-route-timeout", "3", "--token-ids", ids_,
                                               "-n", "2"})),
                  "c");
    EXPECT_NE(w->wait(30), 0);
    EXPECT_TRUE(contains(w->err(), "the key files differ")) << w->err();
    EXPECT_NE(c->wait(30), 0);
    EXPECT_TRUE(contains(c->err(), net->addr(1))) << c->err();
    EXPECT_TRUE(contains(c->err(), "--dist-key differs")) << c->err();
    EXPECT_TRUE(contains(c->err(), "route incomplete after")) << c->err();
}

// A worker's host vanishes mid-generation (its link goes down: no FIN, no RST; without a
// deadline the coordinator would wait forever): the coordinator fails with "route incomplete"
// within --dist-timeout (3 s) and a margin, and exits.
TEST_F(DistNetwork, AVanishedWorkerHostFailsTheGenerationWithinTheTimeout) {
    auto net = lab(1);
    if (!net) GTEST_SKIP() << "cannot create network namespaces: " << why_no_lab_;
    const std::vector<std::string> keyed = {"--dist-key", key_a_, "--dist-timeout", "3"};
    auto w = proc(net->in(1, worker_args("3:output", net->addr(0), 4000, "0.0.0.0", keyed)), "w");
    std::vector<std::string> extra = keyed;
    extra.insert(extra.end(), {"--token-ids", ids_, "-n", "3900"});
    auto c = proc(net->in(0, coordinator_args("0:2", net->addr(0), 4000, extra)), "c");
    ASSERT_TRUE(eventually([&] { return c->out().size() > 20; }, 30)) << c->err() << w->err();
    net->pull_cable(1);
    const auto t0 = clock_type::now();
    EXPECT_EQ(c->wait(20), 1) << c->err();
    const double took = seconds_since(t0);
    EXPECT_LT(took, 3 + 5.0) << c->err();
    std::printf("the coordinator gave up %.1f s after the worker's host vanished (--dist-timeout 3)\n", took);
    const std::string log = c->err();
    EXPECT_TRUE(contains(log, "route incomplete")) << log;
    // The answer deadline ("no answer from the route") or the kernel's (TCP_USER_TIMEOUT:
    // "timed out") ended it, whichever came first.
    EXPECT_TRUE(contains(log, "no answer from the route (" + net->addr(1)) || contains(log, "timed out")) << log;
}

// A worker's host vanishes while the route is idle (the coordinator waits for a second worker):
// keepalive and TCP_USER_TIMEOUT end the control connection, and the coordinator drops the
// worker from the route.
TEST_F(DistNetwork, AVanishedIdleWorkerLeavesTheRoute) {
    auto net = lab(2);
    if (!net) GTEST_SKIP() << "cannot create network namespaces: " << why_no_lab_;
    const std::vector<std::string> keyed = {"--dist-key", key_a_, "--dist-timeout", "3"};
    auto w = proc(net->in(1, worker_args("2:3", net->addr(0), 4000, "0.0.0.0", keyed)), "w");
    std::vector<std::string> extra = keyed;
    extra.insert(extra.end(), {"--dist-route-timeout", "25", "--token-ids", ids_, "-n", "2"});
    auto c = proc(net->in(0, coordinator_args("0:1", net->addr(0), 4000, extra)), "c");
    ASSERT_TRUE(eventually([&] { return contains(c->err(), "registered layers 2:3"); }, 20)) << c->err() << w->err();
    net->pull_cable(1);
    const auto t0 = clock_type::now();
    EXPECT_TRUE(eventually([&] { return contains(c->err(), "(layers 2:3) dropped"); }, 12)) << c->err();
    const double took = seconds_since(t0);
    std::printf("the idle control connection ended %.1f s after the host vanished (--dist-timeout 3)\n", took);
    EXPECT_LT(took, 3 + 6.0);
    EXPECT_TRUE(c->running());  // still waiting for a route, not failed
}

// A stopped worker (SIGSTOP: its kernel still ACKs, so no TCP timeout fires) fails the
// coordinator within --dist-timeout on loopback.
TEST_F(DistNetwork, AStoppedWorkerFailsTheCoordinatorWithinTheTimeout) {
    const uint16_t port = [] {
        dist::Listener l("127.0.0.1", 0);
        return l.port();
    }();
    auto w = proc(worker_args("3:output", "127.0.0.1", port, "127.0.0.1", {"--dist-timeout", "2"}), "w");
    auto c = proc(coordinator_args("0:2", "127.0.0.1", port,
                                   {"--dist-timeout", "2", "--token-ids", ids_, "-n", "3900"}),
                  "c");
    ASSERT_TRUE(eventually([&] { return c->out().size() > 20; }, 30)) << c->err() << w->err();
    w->kill(SIGSTOP);
    const auto t0 = clock_type::now();
    EXPECT_EQ(c->wait(20), 1) << c->err();
    const double took = seconds_since(t0);
    std::printf("the coordinator gave up %.1f s after the worker stopped (--dist-timeout 2)\n", took);
    EXPECT_LT(took, 2 + 4.0);
    EXPECT_TRUE(contains(c->err(), "route incomplete: no answer from the route (127.0.0.1:")) << c->err();
    EXPECT_TRUE(contains(c->err(), "for 2 s (--dist-timeout): a worker stopped")) << c->err();
}

// Connections that connect and send nothing: each is closed after the handshake timeout
// (--dist-timeout 2 here), at most 16 wait at once on a port (the rest are closed at once),
// and the worker and the coordinator serve real peers meanwhile and after.
TEST_F(DistNetwork, SilentConnectionsAreClosedAndBounded) {
    const uint16_t coord_port = [] {
        dist::Listener l("127.0.0.1", 0);
        return l.port();
    }();
    const uint16_t data_port = [] {
        dist::Listener l("127.0.0.1", 0);
        return l.port();
    }();
    // A keyless worker: its data port used to wait for a first frame without a limit.
    auto w = proc({test::binary("ds4"), "-m", model_, "-t", "1", "--role", "worker", "--layers", "3:output",
                   "--coordinator", "127.0.0.1", std::to_string(coord_port), "--listen", "127.0.0.1",
                   std::to_string(data_port), "--dist-timeout", "2"},
                  "w");
    ASSERT_TRUE(eventually([&] { return contains(w->err(), "data port"); }, 20)) << w->err();
    const int silent = silent_connection(data_port);
    ASSERT_GE(silent, 0);
    const auto t0 = clock_type::now();
    // The worker serves a coordinator while the silent connection waits.
    {
        auto c = proc(coordinator_args("0:2", "127.0.0.1", coord_port,
                                       {"--dist-timeout", "2", "--token-ids", ids_, "-n", "2"}),
                      "c1");
        EXPECT_EQ(c->wait(30), 0) << c->err() << w->err();
    }
    EXPECT_TRUE(closed_by_peer(silent, 8)) << w->err();
    const double took = seconds_since(t0);
    close(silent);
    EXPECT_GT(took, 1.5);  // held until the deadline, not refused
    EXPECT_LT(took, 2 + 4.0);
    EXPECT_TRUE(contains(w->err(), "timed out")) << w->err();
    // A connection that begins a frame ("DS4D", the magic) and stalls is closed as well.
    const int stalled = silent_connection(data_port);
    ASSERT_GE(stalled, 0);
    ASSERT_EQ(send(stalled, "DS4D", 4, MSG_NOSIGNAL), 4);
    const auto t1 = clock_type::now();
    EXPECT_TRUE(closed_by_peer(stalled, 8)) << w->err();
    EXPECT_GT(seconds_since(t1), 1.5);
    EXPECT_LT(seconds_since(t1), 2 + 4.0);
    close(stalled);

    // 24 at once on each port: at least 8 are closed at once, the others after the deadline.
    auto flood = [&](uint16_t port, Proc& owner, const char* what) {
        std::vector<int> fds;
        for (int i = 0; i < 24; ++i) fds.push_back(silent_connection(port));
        // The refused ones close as soon as they are accepted; the others not before the 2 s
        // deadline, which starts after their accept (so 1.5 s after the connects is early).
        const auto t0 = clock_type::now();
        std::vector<bool> closed(fds.size());
        int closed_now = 0;
        while (closed_now < 24 - dist::kMaxPendingHandshakes && seconds_since(t0) < 1.5) {
            for (size_t i = 0; i < fds.size(); ++i)
                if (!closed[i] && (fds[i] < 0 || closed_by_peer(fds[i], 0))) {
                    closed[i] = true;
                    ++closed_now;
                }
            std::this_thread::sleep_for(20ms);
        }
        EXPECT_EQ(closed_now, 24 - dist::kMaxPendingHandshakes) << what;
        EXPECT_TRUE(eventually([&] { return contains(owner.err(), what); }, 5)) << owner.err();
        int closed_later = 0;
        for (int fd : fds) closed_later += fd < 0 || closed_by_peer(fd, 8);
        EXPECT_EQ(closed_later, 24) << what;
        for (int fd : fds)
            if (fd >= 0) close(fd);
    };
    flood(data_port, *w, "closing new data connections");
    // A coordinator that waits for layer 2 (the worker holds 3:output) while its control port
    // is flooded; then a worker for layer 2 registers and the route runs through both workers.
    auto c = proc(coordinator_args("0:1", "127.0.0.1", coord_port,
                                   {"--dist-timeout", "2", "--dist-route-timeout", "30", "--token-ids", ids_, "-n",
                                    "2"}),
                  "c2");
    ASSERT_TRUE(eventually([&] { return contains(c->err(), "registered layers 3:output"); }, 20)) << c->err();
    flood(coord_port, *c, "closing new control connections");
    auto w2 = proc(worker_args("2:2", "127.0.0.1", coord_port, "127.0.0.1", {"--dist-timeout", "2"}), "w2");
    EXPECT_EQ(c->wait(30), 0) << c->err() << w->err();
    EXPECT_TRUE(w->running()) << w->err();
    EXPECT_TRUE(w2->running()) << w2->err();
}

}  // namespace
}  // namespace ds4
